"""Counter-based uniform random numbers: the same bits on every device, no generator state.

`uniform(seed, counter, shape)` hashes (seed [B], counter [B], element index) with a 32-bit
integer mixer (lowbias32) into floats in [0, 1). Everything is int64 tensor arithmetic masked
to 32 bits, so CPU and GPU give identical values and a CUDA graph can capture it (the counter
is a device tensor the step advances). Each use passes its own `stream` number so that draws for
different purposes never coincide.
"""
from __future__ import annotations

import torch

MASK = 0xFFFFFFFF


def _mix(x: torch.Tensor) -> torch.Tensor:
    x = x & MASK
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & MASK
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & MASK
    return x ^ (x >> 16)


def uniform(seed: torch.Tensor, counter: torch.Tensor, shape: tuple[int, ...], stream: int) -> torch.Tensor:
    """[B, *shape] float32 in [0, 1): seed/counter [B] int64 tensors."""
    B = seed.shape[0]
    n = 1
    for d in shape:
        n *= d
    index = torch.arange(n, device=seed.device, dtype=torch.int64)[None, :]
    x = _mix(seed.long()[:, None] * 0x9E3779B1 + stream * 0x85EBCA77)
    x = _mix(x ^ (counter.long()[:, None] * 0xC2B2AE3D))
    x = _mix(x ^ index)
    return ((x >> 8).to(torch.float32) * (1.0 / (1 << 24))).view(B, *shape)


def sample(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from each row of probs [..., V] (unnormalised, non-negative) with u [...]."""
    cdf = probs.float().cumsum(-1)
    target = u[..., None] * cdf[..., -1:]
    idx = torch.searchsorted(cdf.contiguous(), target.contiguous(), right=True).squeeze(-1)  # first cdf > u * total
    return idx.clamp_max(probs.shape[-1] - 1)
