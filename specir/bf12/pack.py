"""Pack a bf16 matrix into BF12 (lossless for every bit pattern; layout in `layout.py`).

Per group of 128 weights the packer picks ``base`` and ``esc`` (values of the high exponent
``h = e >> 1``, 0..127) so that every ``h`` in the group is in the window ``base-6 .. base``
(code ``base - h``) or equals ``esc`` (code 7); ``base >= 6``. Such a pair exists iff the group's
distinct ``h`` values, less at most one (the smallest or the largest), span at most 7 values.
Candidates, tried in order:

1. base = max h, esc = the one value below the window (or ``base - 7`` when none is), then
2. base = second-largest h, esc = the largest (a lone high outlier).

A row with a group that fits neither is kept as raw bf16 (`BF12Matrix.raw`).
"""
from __future__ import annotations

import torch

from .layout import CODE_SHIFT, ESCAPE_CODE, GROUP, MANT_POS, MIN_BASE, SIGN_SHIFT, UNIT_OF, UNITS, WINDOW, padded_k
from .matrix import BF12Matrix

_CHUNK_ELEMENTS = 1 << 23  # rows are packed in chunks of about this many weights


def bf16_bits(w: torch.Tensor) -> torch.Tensor:
    """The 16-bit patterns of a bf16 tensor as int32 in 0..65535."""
    return w.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def group_windows(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Choose (base, esc, ok) per group from high exponents `h` (``e >> 1``) int32 `[..., 128]`.

    `ok` is False where no (base, esc) pair covers the group."""
    hmax, hmin = h.amax(-1), h.amin(-1)
    below_max = torch.where(h < hmax[..., None], h, torch.full_like(h, -1)).amax(-1)
    above_min = torch.where(h > hmin[..., None], h, torch.full_like(h, 256)).amin(-1)
    top = hmax.clamp(min=MIN_BASE)
    low_edge = top - (WINDOW - 1)
    fits_top = (hmin >= low_edge) | (above_min >= low_edge)                       # candidate 1
    second = below_max.clamp(min=MIN_BASE)
    fits_outlier = (below_max >= 0) & (hmin >= second - (WINDOW - 1))              # candidate 2
    base = torch.where(fits_top, top, second)
    natural = (top - WINDOW).clamp(min=0)
    esc = torch.where(fits_top, torch.where(hmin >= low_edge, natural, hmin), hmax)
    ok = fits_top | fits_outlier
    base = torch.where(ok, base, torch.full_like(base, MIN_BASE))
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
    high = (bits >> 8) & 0x7F
    sign = (bits >> 15) & 1
    low = bits & 0xFF
    base, esc, ok = group_windows(high)
    offset = base[..., None] - high
    code = torch.where((offset >= 0) & (offset < WINDOW), offset, torch.full_like(offset, ESCAPE_CODE))
    dev = bits.device
    if kp != k:  # padding decodes to a finite positive value (high byte base, low byte 0)
        tail = torch.arange(GROUP, device=dev) >= GROUP - (kp - k)
        code[:, -1, tail] = 0
        sign[:, -1, tail] = 0
        low[:, -1, tail] = 0
    mant = torch.empty_like(low)
    mant[..., MANT_POS.to(dev)] = low
    fields = (code.to(torch.int64) << CODE_SHIFT.to(dev)) | (sign.to(torch.int64) << SIGN_SHIFT.to(dev))
    words = torch.zeros(n, groups, UNITS, dtype=torch.int64, device=dev)
    words.index_add_(2, UNIT_OF.to(dev), fields)          # disjoint bit fields: sum == or
    shifts = torch.arange(0, 32, 8, device=dev)
    code_bytes = (words[..., None] >> shifts) & 0xFF      # little-endian bytes of each 32-bit word
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
