"""ForwardStates for op tests, built exactly as ModelRunner.forward builds them."""
from __future__ import annotations

import torch

from specir.runtime.kv_cache import KVCache
from specir.runtime.model_runner import ForwardState


def causal_mask(T: int, offsets: list[int]) -> torch.Tensor:
    U = max(offsets) + T
    off = torch.tensor(offsets)
    return torch.arange(U)[None, None, :] <= (off[:, None, None] + torch.arange(T)[None, :, None])


def forward_state(cache: KVCache, slots: list[int], positions: torch.Tensor, offsets: list[int],
                  mask: torch.Tensor) -> ForwardState:
    """The state of one forward of T new tokens per request (see ModelRunner.forward)."""
    B, T = positions.shape
    lens = torch.tensor([cache.lens[s] for s in slots])
    off = torch.tensor(offsets)
    U = max(offsets) + T
    S = int(max(cache.lens[s] + o for s, o in zip(slots, offsets))) + T
    slot_t = torch.tensor(slots)
    rel = torch.arange(S)[None, :] - lens[:, None]
    inside = (rel >= 0) & (rel < U)
    gathered = torch.gather(mask, 2, rel.clamp(0, U - 1)[:, None, :].expand(B, T, S))
    visible = (rel < 0)[:, None, :] | (inside[:, None, :] & gathered)
    write_start = lens + off
    rows = write_start[:, None] + torch.arange(T)[None, :]
    cache.pos[slot_t[:, None].expand(B, T), rows] = positions
    return ForwardState(cache, lens, slot_t, write_start, S, visible, positions, int(positions.max()),
                        cache.pos[slot_t, :S])
