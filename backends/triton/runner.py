"""The host-path model runner: Triton kernels behind the reference runner's interface.

Contract: same as specir.runtime.model_runner.ModelRunner — `forward(slots, ids, positions,
offsets=None, mask=None) -> logits [B, T, V]` (a fresh tensor) over `self.cache` (a KVCache whose
`lens` list the caller commits) — so the reference engine's step ops and drafters (sampling,
dynamic trees, plugin ops) drive Triton kernels unchanged. One StaticForward is built per
distinct call shape and reused.
"""
from __future__ import annotations

import torch

from specir.errors import SpecirError

from .compiled_model import CompiledModel
from .forward import ForwardInputs


class TritonModelRunner:
    def __init__(self, compiled: CompiledModel, *, slots: int, max_seq: int):
        self.compiled = compiled
        self.model, self.device, self.dtype = compiled.model, compiled.device, compiled.dtype
        self.vocab = compiled.vocab
        self.cache = compiled.new_cache(slots, max_seq)
        self._forwards: dict[tuple, tuple] = {}

    def forward(self, slots: list[int], ids: torch.Tensor, positions: torch.Tensor,
                offsets: list[int] | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T = ids.shape
        offsets = list(offsets or [0] * B)
        need = max(self.cache.lens[s] + o for s, o in zip(slots, offsets)) + T
        if need > self.cache.max_seq:
            raise SpecirError(f"the KV cache holds {self.cache.max_seq} rows; this forward needs {need}",
                              hint="lower --max-new-tokens or the draft budget")
        identity = list(slots) == list(range(B))
        key = (B, T, None if mask is None else mask.shape[2], identity, any(offsets))
        entry = self._forwards.get(key)
        if entry is None:
            inputs = ForwardInputs.allocate(B, T, self.device, mask_width=key[2], slots=not identity,
                                            offsets=any(offsets))
            entry = (inputs, self.compiled.forward(self.cache, inputs))
            self._forwards[key] = entry
        inputs, fwd = entry
        inputs.ids.copy_(ids)
        inputs.pos.copy_(positions)
        inputs.lens.copy_(torch.tensor([self.cache.lens[s] for s in slots], dtype=torch.int32))
        if inputs.slots is not None:
            inputs.slots.copy_(torch.tensor(slots, dtype=torch.int32))
        if inputs.offsets is not None:
            inputs.offsets.copy_(torch.tensor(offsets, dtype=torch.int32))
        if inputs.mask is not None:
            inputs.mask.copy_(mask)
        return fwd.run().clone()
