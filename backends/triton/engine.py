"""The Triton backend's engine: the device schedule where it applies, the host path elsewhere.

Contract: `TritonEngine(pipeline, device, weights=None)` loads (or takes) the weights of the
models the step uses and compiles them once. `generate(prompts, max_new_tokens, *, temperature,
seed)` returns specir.runtime.engine.Result per prompt with the reference engine's semantics:
- temperature 0 and a step that schedule.match_schedule recognises (AR, chain, n-gram, static
  tree) with length-independent rope tables: graph_engine.GraphEngine (whole step on the device,
  CUDA graphs on a GPU);
- otherwise (sampling, dynamic trees, other steps, dynamic rope): host_engine.HostPathEngine;
- a sliding window shorter than the cache this call needs: the reference engine (torch), since
  the Triton attention kernel has no window.
`last_path` says which one served the latest call and why.
"""
from __future__ import annotations

import torch

from specir.errors import SpecirError
from specir.runtime.engine import Engine
from specir.runtime.weights import load_weights

from .compiled_model import CompiledModel, concrete_device
from .kernels._interpreter_compat import interpreting
from .graph_engine import GraphEngine
from .host_engine import HostPathEngine
from .schedule import Schedule, match_schedule


def used_models(pipeline) -> dict:
    used = {s.lstrip("@") for op in pipeline.step.ops for s in op.symbols}
    return {m.name: m for m in pipeline.models if m.name in used}


def shares_program(a, b) -> bool:
    """Two model regions with the same weights and ops run the same launches (the mask type
    of the graph, causal or tree, is not read by the program: the attention reads the mask
    operand given to each forward)."""
    return a.name == b.name and a.weights == b.weights and a.graph.ops == b.graph.ops and a.attrs == b.attrs


class TritonEngine:
    backend = "triton"

    def __init__(self, pipeline, device="cuda", weights: dict | None = None, base=None,
                 compiled: dict[str, CompiledModel] | None = None):
        """`weights`: model name -> {weight name -> tensor} to use instead of the checkpoint;
        `compiled`: model name -> CompiledModel of the same model region, shared with another
        engine (no second copy of the device weights)."""
        if pipeline.step is None:
            raise SpecirError("the pipeline has no step", hint="add step(%ctx: context) { ... }")
        self.pipeline, self.device = pipeline, concrete_device(device)
        if self.device.type != "cuda" and not interpreting():
            raise SpecirError(f"the triton backend runs on CUDA devices, not {self.device.type!r}",
                              hint="use a GPU target, or set TRITON_INTERPRET=1 to run its kernels in Triton's "
                                   "CPU interpreter (slow; for tests)")
        models = used_models(pipeline)
        self.models: dict[str, CompiledModel] = {}
        for name, model in models.items():
            shared = (compiled or {}).get(name)
            if shared is not None and shares_program(shared.model, model):
                self.models[name] = shared
                continue
            raw = (weights or {}).get(name) or load_weights(model, self.device, base)
            self.models[name] = CompiledModel(model, raw, self.device)
            del raw
        self.host = HostPathEngine(pipeline, self.models, self.device)
        self.schedule = match_schedule(pipeline)
        self.graph = None
        if isinstance(self.schedule, Schedule):
            self.graph = GraphEngine(pipeline, self.schedule, self.models, self.device, eos=self.host.eos,
                                     max_position=self.host.max_position)
        self._reference: Engine | None = None
        self.last_path = ""

    def _path(self, prompts, max_new: int, temperature: float) -> str:
        if temperature > 0:
            return "host: sampling (temperature > 0)"
        if self.graph is None:
            return f"host: {self.schedule}"
        if not all(m.static for m in self.models.values()):
            return "host: rope frequencies depend on the sequence length"
        return "device"

    def _window_too_short(self, rows: int) -> bool:
        return any(w < rows for m in self.models.values() for w in m.windows())

    def generate(self, prompts: list[list[int]], max_new_tokens: int = 64, *, temperature: float = 0.0,
                 seed: int = 0, on_step=None):
        self.host._check_lengths(prompts, max_new_tokens)
        path = self._path(prompts, max_new_tokens, temperature)
        rows = (self.graph.rows_needed(prompts, max_new_tokens) if self.graph is not None else
                max(len(p) for p in prompts) + max_new_tokens + 2 * self.host.max_draft_width() + 4)
        if self._window_too_short(rows + 256):
            self.last_path = "reference: a sliding window shorter than the KV cache (no window in the Triton kernel)"
            if self._reference is None:
                self._reference = Engine(self.pipeline, device=str(self.device))
            return self._reference.generate(prompts, max_new_tokens, temperature=temperature, seed=seed,
                                            on_step=on_step)
        self.last_path = path
        if path == "device":
            return self.graph.generate(prompts, max_new_tokens, on_step=on_step)
        return self.host.generate(prompts, max_new_tokens, temperature=temperature, seed=seed, on_step=on_step)
