"""The inputs of one model forward over new tokens, shared by every backend's executor.

Contract (docs/KERNEL_CONTRACTS.md, "One forward over new tokens"): ids [B, T] int64, pos [B, T]
int64, lens [B] int32 committed rows per request, optional slots [B] int32 (request b lives in
cache slot slots[b]; default b), offsets [B] int32 (new token t goes to row lens + offsets + t)
and mask [B, T, U] bool (query t sees scratch row lens + u where mask[b, t, u]; without a mask,
causally: u <= offsets[b] + t). Executors read these tensors when they run, so a caller changes
a forward's inputs by writing into them (which CUDA-graph replays require).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ForwardInputs:
    ids: torch.Tensor
    pos: torch.Tensor
    lens: torch.Tensor
    slots: torch.Tensor | None = None
    offsets: torch.Tensor | None = None
    mask: torch.Tensor | None = None

    @classmethod
    def allocate(cls, B: int, T: int, device, *, mask_width: int | None = None, slots: bool = False,
                 offsets: bool = False) -> "ForwardInputs":
        z = lambda *shape, dtype: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        return cls(z(B, T, dtype=torch.long), z(B, T, dtype=torch.long), z(B, dtype=torch.int32),
                   z(B, dtype=torch.int32) if slots else None, z(B, dtype=torch.int32) if offsets else None,
                   z(B, T, mask_width, dtype=torch.bool) if mask_width else None)
