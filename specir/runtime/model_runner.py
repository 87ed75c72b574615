"""Executing a model region of the IR op by op with a backend's kernel table (reference, TVM).

What runs is what the IR says: the plan walks `model.graph.ops` in order and calls the kernel
registered for each op name with the op's attributes resolved (weights, rope tables).

Two interfaces over one implementation (`ModelRunner.run_inputs`):
- `ModelRunner.new_cache(B, max_seq)` / `ModelRunner.forward_on(cache, inputs) -> forward` with
  `forward.run() -> logits [B, T, V]`: the executor interface the decode step uses for every
  backend (specir.step; inputs are specir.step.forward_inputs.ForwardInputs, lens a tensor);
- `ModelRunner.forward(slots, ids, positions, offsets, mask)` over the runner's own cache, whose
  `lens` list the caller commits (tests and tools).
New token t of request b is written to cache row lens[b] + offsets[b] + t of slot slots[b] and
attends to every committed row plus the scratch rows lens .. lens + offsets[b] + T - 1 allowed by
`mask` [B, T, U] (U >= max(offsets) + T, column u = row lens + u); without a mask, causally.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import SpecirError
from ..ir.nodes import Model
from ..ir.ops_recurrent import model_state_specs, state_specs, weight_attrs
from ..rope import depends_on_length, rope_frequencies, rotary_dim
from .dtypes import torch_dtype
from .kv_cache import KVCache
from .hybrid_cache import HybridCache
from .packed_recurrent import PackedRows, begin_packed
from .recurrent_state import RecurrentForward, RecurrentStates, tree_parents

OP_KERNELS: dict[str, dict] = {}  # backend name -> {op name -> kernel}; plugins add entries


class RopeTable:
    def __init__(self, rope, head_dim: int):
        self.rope, self.head_dim = rope, head_dim
        self.static = not depends_on_length(rope)
        self._freq, self.attention_factor = rope_frequencies(rope, head_dim, 0)

    def frequencies(self, seq_len: int) -> torch.Tensor:
        if self.static:
            return self._freq
        freq, self.attention_factor = rope_frequencies(self.rope, self.head_dim, seq_len)
        return freq


@dataclass
class ForwardState:
    cache: KVCache
    lens: torch.Tensor  # [B] committed rows per request
    slots: torch.Tensor  # [B]
    write_start: torch.Tensor  # [B] first row written
    attend_len: int  # rows 0 .. S-1 are looked at
    visible: torch.Tensor  # [B, T, S] bool
    positions: torch.Tensor  # [B, T]
    max_position: int
    key_positions: torch.Tensor  # [B, S]
    scratch: dict = field(default_factory=dict)
    recurrent: RecurrentForward | None = None  # recurrent ops' state for this forward (parents from the mask)
    packed: "PackedRows | None" = None  # a packed forward's rows, regrouped per request around recurrent ops

    def window_ok(self, window: int) -> torch.Tensor:
        return (self.positions[:, :, None] - self.key_positions[:, None, :]) < window


class ModelRunner:
    def __init__(self, model: Model, weights: dict[str, torch.Tensor], *, slots: int, max_seq: int,
                 device="cpu", kernels: dict | None = None, backend: str = "reference",
                 state_nodes: int | None = None):
        self.model, self.device = model, torch.device(device)
        self.dtype = torch_dtype(str(model.attrs.get("dtype", "bf16")))
        if kernels is None:
            from ..backends_api import kernel_table
            kernels = kernel_table()
        self.kernels = dict(kernels)
        self.kernels.update(OP_KERNELS.get(backend, {}))
        self.backend = backend
        self.vocab = model.graph.result_type.width
        layers = {}
        for op in model.graph.ops:
            if op.name == "attention":
                layers[op.attrs["layer"]] = (op.attrs["kv_heads"], op.attrs["head_dim"])
        self.layers = layers
        self.state_specs = model_state_specs(model)
        self.state_nodes = state_nodes
        self.cache = self.new_cache(slots, max_seq)
        self.weights = {n: (t.to(self.dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
                        for n, t in weights.items()}  # packed (BF12Matrix) weights stay as loaded
        self.plan = [self._plan(op) for op in model.graph.ops]
        self.recurrent_ops = {i for i, op in enumerate(model.graph.ops) if state_specs(op)}
        self.params = {name: i for i, (name, _) in enumerate(model.graph.params)}

    def _plan(self, op):
        kernel = self.kernels.get(op.name)
        if kernel is None:
            raise SpecirError(f"the {self.backend} backend has no kernel for op {op.name!r}", location=op.loc,
                              hint="register one in specir.runtime.model_runner.OP_KERNELS")
        params = {}
        for key, value in op.attrs.items():
            if (key in ("weight", "bias") or key in weight_attrs(op)) and value:
                if value not in self.weights:
                    raise SpecirError(f"weight {value!r} was not loaded for @{self.model.name}", location=op.loc,
                                      hint="declare it in the model (weight \"name\" : bf16[...])")
                params[key] = self.weights[value]
            else:
                params[key] = value
        if op.name == "rope":
            params["table"] = RopeTable(op.attrs["rope"], op.attrs["head_dim"])
            params["rotary_dim"] = rotary_dim(op.attrs["rope"], op.attrs["head_dim"])
        params.setdefault("scale", 0.0)
        return op.result, kernel, op.values, params

    # ------------------------------------------------------------------ executor interface
    def new_cache(self, slots: int, max_seq: int) -> KVCache:
        if self.state_specs:  # recurrent layers: their state store beside the KV cache, committed with it
            states = RecurrentStates(self.state_specs, slots, self.state_nodes or max_seq, self.dtype, self.device)
            return HybridCache(self.layers, slots, max_seq, self.dtype, self.device, states)
        return KVCache(self.layers, slots, max_seq, self.dtype, self.device)

    def forward_on(self, cache: KVCache, inputs, logits: bool = True) -> "BoundForward":
        return BoundForward(self, cache, inputs, logits)

    def cache_ops(self) -> set[int]:
        """Indices of the ops a forward needs when only its cache writes matter (no logits): the
        impure ops (OpDef.pure is False: they write the cache) and everything they depend on."""
        from ..ir.opdefs import OPS
        needed, keep = set(), set()
        ops = self.model.graph.ops
        for i in range(len(ops) - 1, -1, -1):
            op = ops[i]
            if not getattr(OPS.get(op.name), "pure", True) or (op.result and op.result in needed):
                keep.add(i)
                needed.update(op.values)
        return keep

    # ------------------------------------------------------------------ forward
    def forward(self, slots: list[int], ids: torch.Tensor, positions: torch.Tensor,
                offsets: list[int] | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        B = ids.shape[0]
        lens = torch.tensor([self.cache.lens[s] for s in slots], dtype=torch.int32, device=self.device)
        off = torch.tensor(offsets or [0] * B, dtype=torch.int32, device=self.device)
        slot_t = torch.tensor(slots, device=self.device)
        return self.run_inputs(self.cache, ids, positions, lens, slot_t, off, mask)

    def run_inputs(self, cache: KVCache, ids: torch.Tensor, positions: torch.Tensor, lens: torch.Tensor,
                   slots: torch.Tensor | None, offsets: torch.Tensor | None, mask: torch.Tensor | None,
                   only: set[int] | None = None, row_start: torch.Tensor | None = None) -> torch.Tensor | None:
        """`only`: run just these op indices (cache_ops(): a prefill); returns None then. `row_start`: a
        packed forward's grouping of rows by request (recurrent ops run per request: packed_recurrent.py)."""
        B, T = ids.shape
        dev = self.device
        lens = lens.to(dev).long()
        off = torch.zeros(B, dtype=torch.long, device=dev) if offsets is None else offsets.to(dev).long()
        slot_t = torch.arange(B, device=dev) if slots is None else slots.to(dev).long()
        U = int(off.max()) + T
        if mask is None:
            u = torch.arange(U, device=dev)
            t = torch.arange(T, device=dev)
            mask = u[None, None, :] <= (off[:, None, None] + t[None, :, None])
        else:
            mask = mask.to(dev)
            U = mask.shape[2]
        S = int((lens + off).max()) + T
        if S > cache.max_seq:
            raise SpecirError(f"the KV cache holds {cache.max_seq} rows; this forward needs {S}",
                              hint="lower --max-new-tokens or the draft budget")
        rel = torch.arange(S, device=dev)[None, :] - lens[:, None]  # [B, S]
        inside = (rel >= 0) & (rel < U)
        gathered = torch.gather(mask, 2, rel.clamp(0, U - 1)[:, None, :].expand(B, T, S))
        visible = (rel < 0)[:, None, :] | (inside[:, None, :] & gathered)
        write_start = lens + off
        rows = write_start[:, None] + torch.arange(T, device=dev)[None, :]
        cache.pos[slot_t[:, None].expand(B, T), rows] = positions
        state = ForwardState(cache, lens, slot_t, write_start, S, visible, positions,
                             int(positions.max()), cache.pos[slot_t, :S])
        if isinstance(cache, HybridCache) and row_start is not None:
            state.packed, state.recurrent = begin_packed(cache.recurrent, slot_t, off, mask, row_start.to(dev))
        elif isinstance(cache, HybridCache):
            state.recurrent = cache.recurrent.begin(slot_t, off, tree_parents(mask, off))
        env = {}
        inputs = {"ids": ids, "positions": positions, "mask": mask}
        for name, type_ in self.model.graph.params:
            env[name] = inputs[type_.name]
        for i, (result, kernel, operands, params) in enumerate(self.plan):
            if only is not None and i not in only:
                continue
            if state.packed is not None and i in self.recurrent_ops:
                out = state.packed.call(kernel, params, state, *(env[o] for o in operands))
            else:
                out = kernel(params, state, *(env[o] for o in operands))
            if result is not None:
                env[result] = out
        return None if only is not None else env[self.model.graph.result]


class BoundForward:
    """One forward of a ModelRunner bound to a cache and ForwardInputs (read when it runs);
    `logits=False` runs only what writes the cache and returns None."""

    def __init__(self, runner: ModelRunner, cache: KVCache, inputs, logits: bool = True):
        self.runner, self.cache, self.inputs = runner, cache, inputs
        self.only = None if logits else runner.cache_ops()

    def run(self) -> torch.Tensor | None:
        i = self.inputs
        return self.runner.run_inputs(self.cache, i.ids, i.pos, i.lens, i.slots, i.offsets, i.mask, self.only,
                                      row_start=i.row_start)
