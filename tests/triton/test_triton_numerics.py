"""`round_to`, the kernels' one fp32 -> activation-dtype rounding: round-to-nearest-even bit for bit as
torch's conversion, on the interpreter (integer arithmetic) and on a GPU (the native conversion)."""
import struct

import pytest
import torch
import triton
import triton.language as tl

from specir.backends.triton.kernels._numerics import round_to


@triton.jit
def _round_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n, other=0.0)
    tl.store(out_ptr + i, round_to(x, out_ptr.dtype.element_ty), mask=i < n)


def _f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


# ties to even (down and up), just above a tie, a mantissa carry into the exponent, the largest finite
# value rounding to inf, subnormals, signed zeros and infinities
SPECIAL = [1.0, _f32(0x3F808000), _f32(0x3F818000), _f32(0x3F808001), _f32(0x3FFFFFFF), _f32(0x7F7FFFFF),
           _f32(0x00000001), _f32(0x00408000), -_f32(0x3F818000), 0.0, -0.0, float("inf"), float("-inf")]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_round_to_is_torchs_round_to_nearest_even(dtype, device):
    x = torch.cat([torch.tensor(SPECIAL), torch.randn(499) * 10.0 ** torch.randint(-6, 6, (499,))]).to(device)
    out = torch.empty(x.numel(), dtype=dtype, device=device)
    _round_kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    want = x.to(dtype)
    assert torch.equal(out.view(torch.int16), want.view(torch.int16))


def test_round_to_keeps_nan_a_nan(device):
    x = torch.tensor([_f32(0x7FC00000), _f32(0x7FFFFFFF), _f32(0xFFFFFFFF), _f32(0x7F800001)], device=device)
    out = torch.empty(4, dtype=torch.bfloat16, device=device)
    _round_kernel[(1,)](x, out, 4, BLOCK=4)
    assert torch.isnan(out.float()).all()
