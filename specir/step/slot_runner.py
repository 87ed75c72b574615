"""One model forward at a time over cache slots whose committed lengths the caller keeps on the host:
the convenience interface tests, tools and benchmarks use around any backend's executor.

Contract: `SlotRunner(executor, slots=S, max_seq=R)` owns a cache (`executor.new_cache`) and a
host list `cache.lens`; `forward(slots, ids [B, T], positions [B, T], offsets=None, mask=None)`
returns a fresh logits tensor [B, T, V] (new token t of request b written at row
lens[slots[b]] + offsets[b] + t, see specir.step.forward_inputs); the caller commits rows by
changing `cache.lens`. One executor forward is built per distinct call shape and reused.
"""
from __future__ import annotations

import torch

from ..errors import SpecirError
from .forward_inputs import ForwardInputs


class SlotRunner:
    def __init__(self, executor, *, slots: int, max_seq: int):
        self.executor = executor
        self.device = getattr(executor, "device", torch.device("cpu"))
        self.cache = executor.new_cache(slots, max_seq)
        self.cache.lens = [0] * slots
        self._forwards: dict[tuple, tuple] = {}

    def forward(self, slots: list[int], ids: torch.Tensor, positions: torch.Tensor,
                offsets: list[int] | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T = ids.shape
        offsets = list(offsets or [0] * B)
        need = max(self.cache.lens[s] + o for s, o in zip(slots, offsets)) + T
        if need > self.cache.max_seq:
            raise SpecirError(f"the KV cache holds {self.cache.max_seq} rows; this forward needs {need}",
                              hint="lower --max-new-tokens or the draft budget")
        key = (B, T, None if mask is None else mask.shape[2], any(offsets))
        entry = self._forwards.get(key)
        if entry is None:
            inputs = ForwardInputs.allocate(B, T, self.device, mask_width=key[2], slots=True, offsets=any(offsets))
            entry = (inputs, self.executor.forward_on(self.cache, inputs))
            self._forwards[key] = entry
        inputs, fwd = entry
        inputs.ids.copy_(ids)
        inputs.pos.copy_(positions)
        inputs.lens.copy_(torch.tensor([self.cache.lens[s] for s in slots], dtype=torch.int32))
        inputs.slots.copy_(torch.tensor(slots, dtype=torch.int32))
        if inputs.offsets is not None:
            inputs.offsets.copy_(torch.tensor(offsets, dtype=torch.int32))
        if inputs.mask is not None:
            inputs.mask.copy_(mask)
        return fwd.run().clone()
