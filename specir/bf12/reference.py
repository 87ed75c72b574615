"""CPU (reference backend) linear over BF12 weights.

Decodes the whole matrix to bf16 and calls the reference linear (specir.kernel_reference's
`linear_reference`, i.e. `F.linear` in x.dtype), so the result has the same bits as the reference
backend's `linear` over `unpack(packed)` on the same device by construction (decoding per tile
would let torch pick a different blocking, hence a different summation order).
"""
from __future__ import annotations

import torch

from .. import kernel_reference
from .matrix import BF12Matrix
from .unpack import unpack


def linear_reference(x: torch.Tensor, packed: BF12Matrix, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`y = x @ W^T (+ bias)` with W = unpack(packed); W is cast to x.dtype like a plain linear
    layer whose weights were loaded in the activation dtype."""
    return kernel_reference.linear_reference(x, unpack(packed.to(x.device) if packed.device != x.device else packed),
                                             bias)
