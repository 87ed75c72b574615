"""Pack a bf16 matrix into BF12 (lossless for every bit pattern).

Per group of 128 weights the packer picks a base exponent B and an escape exponent E so that
every exponent in the group is in the window ``B-14 .. B`` (code ``B - e``) or equals E (code 15).
Such a pair exists iff the group's distinct exponents, less at most one (the smallest or the
largest), span at most 15 binades. Candidates, tried in order:

1. B = max exponent, E = the one exponent below the window (or ``B - 15`` when none is), then
2. B = second-largest exponent, E = the largest (a lone high outlier).

A row with a group that fits neither is kept as raw bf16 (`BF12Matrix.raw`).
"""
from __future__ import annotations

import torch

from .layout import ESCAPE_CODE, GROUP, MANT_POS, NIBBLE_POS, WINDOW, padded_k
from .matrix import BF12Matrix

_CHUNK_ELEMENTS = 1 << 23  # rows are packed in chunks of about this many weights


def bf16_bits(w: torch.Tensor) -> torch.Tensor:
    """The 16-bit patterns of a bf16 tensor as int32 in 0..65535."""
    return w.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def group_windows(exp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Choose (base, esc, ok) per group from exponents `exp` int32 `[..., 128]`.

    `ok` is False where no (base, esc) pair covers the group."""
    emax, emin = exp.amax(-1), exp.amin(-1)
    below_max = torch.where(exp < emax[..., None], exp, torch.full_like(exp, -1)).amax(-1)
    above_min = torch.where(exp > emin[..., None], exp, torch.full_like(exp, 256)).amin(-1)
    low_edge = emax - (WINDOW - 1)
    fits_top = (emin >= low_edge) | (above_min >= low_edge)          # candidate 1
    fits_outlier = (below_max >= 0) & (emin >= below_max - (WINDOW - 1))  # candidate 2
    base = torch.where(fits_top, emax, below_max)
    natural = (emax - WINDOW).clamp(min=0)
    esc = torch.where(fits_top, torch.where(emin >= low_edge, natural, emin), emax)
    ok = fits_top | fits_outlier
    base = torch.where(ok, base, torch.zeros_like(base))
    esc = torch.where(ok, esc, torch.zeros_like(esc))
    return base, esc, ok


def _pack_rows(bits: torch.Tensor, k: int):
    """Pack int32 bit patterns `[n, K]`: returns (mant, code, base, esc, row_ok)."""
    n = bits.shape[0]
    kp = padded_k(k)
    groups = kp // GROUP
    if kp != k:  # pad with a copy of each group's first weight: adds no new exponent
        pad = bits[:, (groups - 1) * GROUP: (groups - 1) * GROUP + 1].expand(n, kp - k)
        bits = torch.cat([bits, pad], dim=1)
    bits = bits.view(n, groups, GROUP)
    exp = (bits >> 7) & 0xFF
    sign_mant = ((bits >> 8) & 0x80) | (bits & 0x7F)
    base, esc, ok = group_windows(exp)
    offset = base[..., None] - exp
    code = torch.where((offset >= 0) & (offset < WINDOW), offset, torch.full_like(offset, ESCAPE_CODE))
    dev = bits.device
    if kp != k:  # padding decodes to a finite positive value (base - code, mantissa 0)
        tail = torch.arange(GROUP, device=dev) >= GROUP - (kp - k)
        pad_code = (base[:, -1] == 255).to(torch.int32)[:, None].expand(n, int(tail.sum()))
        code[:, -1, tail] = pad_code
        sign_mant[:, -1, tail] = 0
    mant = torch.empty_like(sign_mant)
    mant[..., MANT_POS.to(dev)] = sign_mant
    nibbles = torch.empty_like(code)
    nibbles[..., NIBBLE_POS.to(dev)] = code
    code_bytes = nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)
    return (mant.reshape(n, kp).to(torch.uint8), code_bytes.reshape(n, kp // 2).to(torch.uint8),
            base.to(torch.uint8), esc.to(torch.uint8), ok.all(-1))


def pack(w: torch.Tensor) -> BF12Matrix:
    """Pack a 2-D bf16 tensor `[N, K]` into BF12, on the tensor's device (a GPU packs an
    8B-parameter model in seconds; the CPU takes about 0.15 s per million weights)."""
    if w.dim() != 2 or w.dtype != torch.bfloat16:
        raise ValueError(f"BF12 packs 2-D bf16 matrices, got {tuple(w.shape)} {w.dtype}")
    n, k = w.shape
    if k == 0:
        raise ValueError("BF12 cannot pack a matrix with K = 0")
    w = w.detach()
    kp = padded_k(k)
    step = max(1, _CHUNK_ELEMENTS // kp)
    parts = [_pack_rows(bf16_bits(w[i:i + step]), k) for i in range(0, n, step)]
    mant, code, base, esc, ok = (torch.cat(x) if len(x) > 1 else x[0] for x in zip(*parts))
    raw_rows = (~ok).nonzero().flatten().to(torch.int32)
    if len(raw_rows):
        mant, code, base, esc = (t[ok] for t in (mant, code, base, esc))
    return BF12Matrix((n, k), mant.contiguous(), code.contiguous(), base.contiguous(),
                      esc.contiguous(), w[raw_rows.long()].contiguous(), raw_rows)
