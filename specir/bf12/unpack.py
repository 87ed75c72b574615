"""Unpack BF12 back to the exact bf16 matrix (torch, any device)."""
from __future__ import annotations

import torch

from .layout import CODE_SHIFT, ESCAPE_CODE, GROUP, MANT_POS, SIGN_SHIFT, UNIT_OF, UNITS
from .matrix import BF12Matrix


def decode_rows(mant: torch.Tensor, code: torch.Tensor, base: torch.Tensor, esc: torch.Tensor,
                k: int) -> torch.Tensor:
    """Decode packed rows (planes as in `BF12Matrix`) to bf16 `[rows, k]`."""
    n, kp = mant.shape
    groups = kp // GROUP
    dev = mant.device
    low = mant.view(n, groups, GROUP).to(torch.int32)[..., MANT_POS.to(dev)]
    b = code.view(n, groups, UNITS, 4).to(torch.int64)
    words = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)
    per_weight = words[..., UNIT_OF.to(dev)]
    c = ((per_weight >> CODE_SHIFT.to(dev)) & 7).to(torch.int32)
    s = ((per_weight >> SIGN_SHIFT.to(dev)) & 1).to(torch.int32)
    base_ = base.to(torch.int32)[..., None]
    high = torch.where(c == ESCAPE_CODE, esc.to(torch.int32)[..., None], base_ - c)
    bits = (s << 15) | (high << 8) | low
    bits = bits.view(n, kp)[:, :k]
    return bits.to(torch.int16).view(torch.bfloat16)


def unpack(packed: BF12Matrix) -> torch.Tensor:
    """The bf16 matrix `[N, K]` that `packed` encodes, bit for bit, on `packed`'s device."""
    n, k = packed.shape
    rows = decode_rows(packed.mant, packed.code, packed.base, packed.esc, k)
    if packed.raw_row_count == 0:
        return rows
    out = torch.empty(n, k, dtype=torch.bfloat16, device=packed.device)
    out[packed.raw_rows.long()] = packed.raw
    out[packed.rows.long()] = rows
    return out
