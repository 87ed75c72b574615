"""Ancestor masks for token trees."""
from __future__ import annotations

import torch


def ancestor_mask(parents: list[int], size: int | None = None) -> torch.Tensor:
    """[size, size] bool: row t is True at t and at every ancestor of t. Rows past the tree
    (padding) see only themselves."""
    n = len(parents)
    size = size or n
    mask = torch.zeros(size, size, dtype=torch.bool)
    for t in range(size):
        mask[t, t] = True
        if t < n:
            p = parents[t]
            while p >= 0:
                mask[t, p] = True
                p = parents[p]
    return mask
