"""Where each weight of a 128-weight group lives in the BF12 planes (see docs/BF12.md).

A group is 128 consecutive weights of one row along K. Index ``k`` in ``0..127`` splits as
``k = 32*r + 2*t + p`` with pair slot ``r`` in 0..3, unit ``t`` in 0..15 and parity ``p`` in 0..1.
The kernel reads, per unit ``t``, one 64-bit mantissa word (8 bytes) and one 32-bit code word
(8 nibbles) and rebuilds from them four 32-bit words ``H_r`` that each hold the bf16 pair
``(k, k+1) = (32r+2t, 32r+2t+1)``, the same word a kernel reading raw bf16 loads.

- mantissa byte of ``k``: byte ``8*t + 4*(r//2) + (r%2) + 2*p`` of the group's 128 bytes, so
  ``(word >> 8*(r%2)) & 0x00FF00FF`` on the low (r < 2) or high (r >= 2) half of the 64-bit word
  puts the pair's bytes in the two 16-bit halves;
- code nibble of ``k``: nibble ``r + 4*p`` of the group's 32-bit code word ``t`` (little endian,
  nibble ``j`` at bits ``4j..4j+3``), so one shift by ``3 - 4r`` and a mask put the pair's two
  codes at bits 3..6 and 19..22.
"""
from __future__ import annotations

import torch

GROUP = 128            # weights per group (along K)
UNITS = 16             # 64-bit mantissa words (and 32-bit code words) per group
PAIR_SLOTS = 4         # bf16 pair words rebuilt per unit
ESCAPE_CODE = 15       # code meaning "exponent = the group's escape exponent"
WINDOW = 15            # codes 0..14: exponent = base - code


def _positions() -> tuple[torch.Tensor, torch.Tensor]:
    k = torch.arange(GROUP)
    r, t, p = k // 32, (k % 32) // 2, k % 2
    mant_pos = 8 * t + 4 * (r // 2) + (r % 2) + 2 * p
    nibble_pos = 8 * t + r + 4 * p
    return mant_pos, nibble_pos


MANT_POS, NIBBLE_POS = _positions()
"""MANT_POS[k]: byte of weight k within its group's mantissa bytes; NIBBLE_POS[k]: nibble of
weight k within its group's 128 code nibbles (byte NIBBLE_POS // 2, high nibble if odd)."""

assert sorted(MANT_POS.tolist()) == list(range(GROUP))
assert sorted(NIBBLE_POS.tolist()) == list(range(GROUP))


def padded_k(k: int) -> int:
    """K rounded up to a whole number of groups (the planes' row length)."""
    return -(-k // GROUP) * GROUP
