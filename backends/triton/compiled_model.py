"""A model region ready for the Triton backend: its launch plan, device weights and rope tables.

Contract: `CompiledModel(model, raw_weights, device)` plans the graph (program.py), prepares the
weights (weights.py; `raw_weights` may be dropped afterwards) and computes every rope table once.
`new_cache(slots, max_seq)` gives a KV cache shaped for its attention layers (a HybridCache with
the recurrent state store, `state_nodes` scratch nodes per slot (default max_seq), when the graph
has recurrent ops);
`forward(cache, inputs)` a StaticForward bound to them (cache-only forwards share one buffer pool).
"""
from __future__ import annotations

import torch

from specir.ir.nodes import Model
from specir.rope import depends_on_length, rope_frequencies
from specir.runtime.dtypes import torch_dtype
from specir.runtime.hybrid_cache import HybridCache
from specir.runtime.kv_cache import KVCache
from specir.runtime.recurrent_state import RecurrentStates

from .forward import ForwardInputs, SharedPool, StaticForward
from .program import plan_program
from .weights import prepare_weights


class RopeTable:
    """inv_freq on the device and the attention factor of one rope attribute set. Tables whose
    frequencies depend on the sequence length (dynamic, longrope) recompute them from the
    largest position of each forward, which reads it on the host (`static` is then False)."""

    def __init__(self, rope, head_dim: int, device):
        self.rope, self.head_dim, self.device = rope, head_dim, device
        self.static = not depends_on_length(rope)
        freq, self.attention_factor = rope_frequencies(rope, head_dim, 0)
        self._inv_freq = freq.to(device=device, dtype=torch.float32).contiguous()

    def inv_freq(self, pos: torch.Tensor) -> torch.Tensor:
        if self.static:
            return self._inv_freq
        freq, self.attention_factor = rope_frequencies(self.rope, self.head_dim, int(pos.max()) + 1)
        return freq.to(device=self.device, dtype=torch.float32).contiguous()


def concrete_device(device) -> torch.device:
    """`cuda` -> `cuda:<current>` (tensors report the indexed form; caches keyed by device agree)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


class CompiledModel:
    def __init__(self, model: Model, raw_weights: dict, device, state_nodes: int | None = None):
        self.model, self.name = model, model.name
        self.state_nodes = state_nodes
        self.device = concrete_device(device)
        self.dtype = torch_dtype(str(model.attrs.get("dtype", "bf16")))
        self.program = plan_program(model)
        self.weights = prepare_weights(self.program, raw_weights, self.dtype)
        self.vocab = model.graph.result_type.width
        # padded per-request buffers of packed forwards' recurrent launches (forward.py), shared by every
        # launch and forward size (they run one at a time), keyed by (role, rows, width, dtype)
        self.packed_buffers: dict[tuple, torch.Tensor] = {}
        self.ropes: dict[tuple, RopeTable] = {}
        for launch in self.program.launches:
            if "rope" in launch.attrs:
                self.rope_table(launch.attrs["rope"], launch.attrs["head_dim"])

    def rope_table(self, rope, head_dim: int) -> RopeTable:
        key = (rope, head_dim)
        if key not in self.ropes:
            self.ropes[key] = RopeTable(rope, head_dim, self.device)
        return self.ropes[key]

    @property
    def static(self) -> bool:
        """True when a forward needs no host read (every rope table is length-independent)."""
        return all(t.static for t in self.ropes.values())

    def windows(self) -> list[int]:
        return [launch.attrs["window"] for launch in self.program.launches
                if launch.kind == "attention" and launch.attrs["window"]]

    def new_cache(self, slots: int, max_seq: int) -> KVCache:
        if self.program.states:
            states = RecurrentStates(self.program.states, slots, self.state_nodes or max_seq, self.dtype, self.device)
            return HybridCache(self.program.layers, slots, max_seq, self.dtype, self.device, states)
        return KVCache(self.program.layers, slots, max_seq, self.dtype, self.device)

    def forward(self, cache: KVCache, inputs: ForwardInputs, logits: bool = True) -> StaticForward:
        """A forward over `inputs`; the cache-only ones (prefills, logits=False) of this model share
        their intermediate buffers (one SharedPool), so a prefill graph per shape costs no memory per shape."""
        if logits:
            return StaticForward(self, cache, inputs, logits)
        if getattr(self, "_prefill_pool", None) is None:
            self._prefill_pool = SharedPool(self.device)
        return StaticForward(self, cache, inputs, logits, pool=self._prefill_pool)

    forward_on = forward  # the executor interface of specir.step
