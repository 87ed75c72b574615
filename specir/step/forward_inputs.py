"""The inputs of one model forward over new tokens, shared by every backend's executor.

Contract (docs/KERNEL_CONTRACTS.md, "One forward over new tokens"): ids [B, T] int64, pos [B, T]
int64, lens [B] int32 committed rows per request, optional slots [B] int32 (request b lives in
cache slot slots[b]; default b), offsets [B] int32 (new token t goes to row lens + offsets + t)
and mask [B, T, U] bool (query t sees scratch row lens + u where mask[b, t, u]; without a mask,
causally: u <= offsets[b] + t). Executors read these tensors when they run, so a caller changes
a forward's inputs by writing into them (which CUDA-graph replays require).

Optional row_start [R + 1] int32 (a packed forward, specir/step/ragged.py: B one-token rows of R
request slots): request r owns rows row_start[r] .. row_start[r + 1] - 1 (contiguous, ascending;
lens and slots equal on them, offsets the nodes, ascending) and rows >= row_start[R] are pad rows.
It says only how rows group, never what a real row computes: an executor may use it to read a
request's KV once for all its rows, and then must write no KV for a pad row (whose logits are then
unspecified, finite or not; a caller drops them). An executor may also ignore it (pad rows
repeat row 0 and rewrite row 0's KV row with row 0's own values). A model with recurrent layers
needs it: its recurrent ops regroup the rows per request (specir/runtime/packed_recurrent.py).
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
    row_start: torch.Tensor | None = None

    @classmethod
    def allocate(cls, B: int, T: int, device, *, mask_width: int | None = None, slots: bool = False,
                 offsets: bool = False, requests: int | None = None) -> "ForwardInputs":
        """Zeroed inputs; `requests` R: with row_start [R + 1] (its zeros: every row a pad row)."""
        z = lambda *shape, dtype: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        return cls(z(B, T, dtype=torch.long), z(B, T, dtype=torch.long), z(B, dtype=torch.int32),
                   z(B, dtype=torch.int32) if slots else None, z(B, dtype=torch.int32) if offsets else None,
                   z(B, T, mask_width, dtype=torch.bool) if mask_width else None,
                   z(requests + 1, dtype=torch.int32) if requests else None)
