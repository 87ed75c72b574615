"""BF12 pack/unpack is exact for every bf16 bit pattern (compared as int16, never as floats)."""
import math

import pytest
import torch

from specir.bf12 import GROUP, pack, unpack
from specir.bf12.layout import CODE_SHIFT, ESCAPE_CODE, UNIT_OF


def bits(t):
    return t.contiguous().view(torch.int16)


def from_bits(b):
    return b.to(torch.int16).view(torch.bfloat16)


def tame(n, k):
    """Random weights whose exponents span 2 binades (no escape, no raw row by chance)."""
    signs = torch.where(torch.rand(n, k) < 0.5, -1.0, 1.0)
    return (signs * (0.5 + torch.rand(n, k)) * 0.02).to(torch.bfloat16)


def assert_roundtrip(w):
    p = pack(w)
    assert torch.equal(bits(unpack(p)), bits(w))
    return p


def test_all_65536_patterns_in_order():
    w = from_bits(torch.arange(65536, dtype=torch.int32)).view(512, 128)
    p = assert_roundtrip(w)
    assert p.raw_row_count == 0  # each row: one sign, one exponent


def test_all_65536_patterns_shuffled(seed):
    perm = torch.randperm(65536)
    w = from_bits(torch.arange(65536, dtype=torch.int32)[perm]).view(256, 256)
    assert_roundtrip(w)
    # ragged K: 65536 = 128 * 512 -> reshape to rows of 512 + a ragged slice
    assert_roundtrip(w.reshape(128, 512)[:, :389])


@pytest.mark.parametrize("shape", [(3, 1), (5, 127), (7, 129), (9, 300), (4, 1000)])
def test_random_bits_ragged(seed, shape):
    w = from_bits(torch.randint(-32768, 32768, shape, dtype=torch.int32))
    assert_roundtrip(w)


def test_specials_roundtrip(seed):
    w = (torch.randn(6, 260) * 0.02).to(torch.bfloat16)
    w[0, :7] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-39])
    w[1, 100] = -0.0
    w[2, :] = 0.0
    w[3, 5] = 2.0 ** -133  # smallest subnormals
    w[4, 17] = from_bits(torch.tensor([0x7FC1]))[0]  # NaN with payload
    w[4, 18] = from_bits(torch.tensor([0xFF81]))[0]
    assert_roundtrip(w)


def test_row_spanning_many_binades(seed):
    k = 4 * GROUP
    exps = torch.linspace(-60, 60, k).round()
    signs = torch.where(torch.rand(k) < 0.5, -1.0, 1.0)
    row = (signs * torch.pow(2.0, exps) * (1 + torch.rand(k))).to(torch.bfloat16)
    w = torch.cat([torch.stack([row, row.flip(0)]), tame(1, k)])
    p = assert_roundtrip(w)
    assert p.raw_row_count == 2 and p.raw_rows.tolist() == [0, 1]
    assert p.rows.tolist() == [2]


def _codes(p):
    """Per-weight 3-bit codes [P, Kp] (in the layout's weight order)."""
    b = p.code.to(torch.int64).view(p.code.shape[0], -1, 4)
    words = (b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)).view(p.code.shape[0], -1, 16)
    return ((words[..., UNIT_OF] >> CODE_SHIFT) & 7).flatten(1)


def test_escape_below_window_stays_packed(seed):
    w = tame(2, GROUP)
    w[0, 3] = 1e-30   # far below the window: the group's escape exponent
    w[0, 9] = -1e-30
    w[1, 40] = 0.0    # zero: escape exponent 0
    p = assert_roundtrip(w)
    assert p.raw_row_count == 0
    assert int((_codes(p) == ESCAPE_CODE).sum()) >= 3


def test_lone_high_outlier_stays_packed(seed):
    w = tame(1, GROUP)
    w[0, 0] = 3e20  # above the others by ~80 binades: base = second-largest exponent
    p = assert_roundtrip(w)
    assert p.raw_row_count == 0
    high = (int(bits(w)[0, 0]) >> 8) & 0x7F  # the outlier's high exponent e >> 1
    assert high in (int(p.esc[0, 0]), int(p.base[0, 0]))  # the window's top or the escape value


def test_lowest_exponent_bit_lives_in_the_low_byte(seed):
    w = tame(1, GROUP)
    w[0, 5] = 2.0 ** -20      # exponent 107: the high-exponent window is pair-aligned
    w[0, 6] = -(2.0 ** -21)   # exponent 106: same high exponent 53, so still one escape value
    p = assert_roundtrip(w)
    assert p.raw_row_count == 0


def test_two_far_exponents_make_a_raw_row(seed):
    w = tame(3, 2 * GROUP)
    w[1, GROUP + 2] = 1e-30
    w[1, GROUP + 3] = 1e-35
    p = assert_roundtrip(w)
    assert p.raw_rows.tolist() == [1]


def test_gaussian_large_roundtrip(seed):
    w = (torch.randn(256, 1536) * 0.02).to(torch.bfloat16)
    assert_roundtrip(w)


def test_pack_rejects_non_bf16():
    with pytest.raises(ValueError):
        pack(torch.zeros(4, 4))
    with pytest.raises(ValueError):
        pack(torch.zeros(4, dtype=torch.bfloat16))
