"""CPU (reference backend) linear over BF12 weights.

Decodes the whole matrix to bf16 and calls `torch.nn.functional.linear`, so the result has the
same bits as `F.linear(x, unpack(packed), bias)` on the same device by construction (decoding
per tile would let torch pick a different blocking, hence a different summation order).
"""
from __future__ import annotations

import torch

from .matrix import BF12Matrix
from .unpack import unpack


def linear_reference(x: torch.Tensor, packed: BF12Matrix, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`y = x @ W^T (+ bias)` with W = unpack(packed); W is cast to x.dtype like a plain linear
    layer whose weights were loaded in the activation dtype."""
    w = unpack(packed.to(x.device) if packed.device != x.device else packed)
    if w.dtype != x.dtype:
        w = w.to(x.dtype)
    return torch.nn.functional.linear(x, w, bias)
