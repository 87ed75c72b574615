"""Unpack BF12 back to the exact bf16 matrix (torch, any device)."""
from __future__ import annotations

import torch

from .layout import ESCAPE_CODE, GROUP, MANT_POS, NIBBLE_POS
from .matrix import BF12Matrix


def decode_rows(mant: torch.Tensor, code: torch.Tensor, base: torch.Tensor, esc: torch.Tensor,
                k: int) -> torch.Tensor:
    """Decode packed rows (planes as in `BF12Matrix`) to bf16 `[rows, k]`."""
    n, kp = mant.shape
    groups = kp // GROUP
    dev = mant.device
    sign_mant = mant.view(n, groups, GROUP).to(torch.int32)[..., MANT_POS.to(dev)]
    pair = code.view(n, groups, GROUP // 2).to(torch.int32)
    nibbles = torch.stack([pair & 0xF, pair >> 4], dim=-1).view(n, groups, GROUP)
    c = nibbles[..., NIBBLE_POS.to(dev)]
    b = base.to(torch.int32)[..., None]
    e = torch.where(c == ESCAPE_CODE, esc.to(torch.int32)[..., None], b - c)
    bits = ((sign_mant & 0x80) << 8) | (e << 7) | (sign_mant & 0x7F)
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
