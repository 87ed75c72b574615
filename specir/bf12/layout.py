"""Where each weight of a 128-weight group lives in the BF12 planes (format version 2, docs/BF12.md).

A bf16 weight is two bytes: high byte ``s | e >> 1`` (sign, top 7 exponent bits) and low byte
``(e & 1) << 7 | m`` (lowest exponent bit, 7 mantissa bits). BF12 stores the low byte verbatim
(the `mant` plane), and for the high byte the sign plus a 3-bit code ``c`` into a per-group table
``T[c]`` of high-exponent values ``h = e >> 1``: ``T[c] = base - c`` for c in 0..6 and
``T[7] = esc``. A group is 128 consecutive weights of one row along K.

Index ``k`` in ``0..127`` splits as ``k = 32*r + 2*t + p`` (pair slot ``r`` 0..3, unit ``t`` 0..15,
parity ``p`` 0..1). Unit ``t`` is one 64-bit word of the `mant` plane and one 32-bit word of the
`code` plane; from them the kernel rebuilds the four 32-bit words ``H_r`` that hold the bf16 pair
``(32r+2t, 32r+2t+1)``, the words a kernel reading raw bf16 loads. With ``j = 2*(r % 2) + p``:

- low byte of ``k``: byte ``8*t + 2*r + p`` of the group's 128 bytes (byte ``j`` of the unit's low
  32-bit half for r < 2, of its high half for r >= 2);
- code of ``k``: bits ``4j .. 4j+2`` (r < 2) or ``16 + 4j .. 16 + 4j + 2`` (r >= 2) of the unit's
  32-bit little-endian code word; sign of ``k``: bit ``8j + 7`` (r < 2) or ``8j + 3`` (r >= 2).

So ``X & 0x77777777`` holds the codes of r < 2 in bits 0..15 and of r >= 2 in bits 16..31, in the
nibble order of a ``prmt`` selector (one byte-table lookup per 4 weights), and the signs sit at
the byte tops of ``X`` (r < 2) and of ``X << 4`` (r >= 2).
"""
from __future__ import annotations

import torch

GROUP = 128            # weights per group (along K)
UNITS = 16             # 64-bit `mant` words (and 32-bit code words) per group
PAIR_SLOTS = 4         # bf16 pair words rebuilt per unit
ESCAPE_CODE = 7        # code meaning "high exponent = the group's escape value"
WINDOW = 7             # codes 0..6: high exponent = base - code
MIN_BASE = 6           # base >= 6: the kernel's table bytes base - c never borrow


def _positions() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    k = torch.arange(GROUP)
    r, t, p = k // 32, (k % 32) // 2, k % 2
    j = 2 * (r % 2) + p
    low = r < 2
    mant_pos = 8 * t + 2 * r + p
    code_shift = torch.where(low, 4 * j, 16 + 4 * j)
    sign_shift = torch.where(low, 8 * j + 7, 8 * j + 3)
    return mant_pos, t, code_shift, sign_shift


MANT_POS, UNIT_OF, CODE_SHIFT, SIGN_SHIFT = _positions()
"""MANT_POS[k]: byte of weight k within its group's 128 low bytes; UNIT_OF[k]: its unit (32-bit
code word); CODE_SHIFT[k] / SIGN_SHIFT[k]: bit of its 3-bit code / its sign in that word."""

assert sorted(MANT_POS.tolist()) == list(range(GROUP))
_bits = sorted((UNIT_OF * 32 + CODE_SHIFT + i).tolist() for i in range(3))
assert sorted(sum(_bits, []) + (UNIT_OF * 32 + SIGN_SHIFT).tolist()) == list(range(GROUP * 4))


def padded_k(k: int) -> int:
    """K rounded up to a whole number of groups (the planes' row length)."""
    return -(-k // GROUP) * GROUP
