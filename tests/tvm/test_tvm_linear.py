"""Linear (GEMV and skinny GEMM) against torch computing in fp32 from the same weights."""

import pytest
import torch

from specir.backends.tvm.reference import linear_reference

from .conftest import assert_close_scaled


@pytest.mark.parametrize("w_dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("m", [1, 3, 17, 128])
def test_linear_matches_fp32_torch(kernels, w_dtype, m):
    n, k = 96, 256
    x = torch.randn(m, k)
    w = torch.randn(n, k).to(w_dtype)
    y = kernels.linear(x, w)
    assert y.shape == (m, n) and y.dtype == torch.float32
    assert_close_scaled(y, linear_reference(x, w), rtol=1e-5)


@pytest.mark.parametrize("m", [1, 5])
def test_linear_bias_and_leading_dims(kernels, m):
    x = torch.randn(2, m, 256)
    w = torch.randn(96, 256).bfloat16()
    bias = torch.randn(96).bfloat16()
    y = kernels.linear(x, w, bias)
    assert y.shape == (2, m, 96)
    assert_close_scaled(y, linear_reference(x, w, bias), rtol=1e-5)


def test_linear_bf16_activations_round_once(kernels):
    x = torch.randn(3, 256).bfloat16()
    w = torch.randn(96, 256).bfloat16()
    y = kernels.linear(x, w)
    ref = linear_reference(x, w)
    assert y.dtype == torch.bfloat16
    # one rounding of an fp32 sum: results agree to one bf16 ulp
    assert ((y.float() - ref.float()).abs() <= ref.float().abs() * 2**-7 + 1e-6).all()


def test_linear_odd_sizes_and_out(kernels):
    """N and K that no tile divides evenly fall back to smaller tiles; out= is written."""
    x = torch.randn(3, 36)
    w = torch.randn(37, 36).bfloat16()
    out = torch.empty(3, 37)
    y = kernels.linear(x, w, out=out)
    assert y.data_ptr() == out.data_ptr()
    assert_close_scaled(out, linear_reference(x, w), rtol=1e-5)


def test_naive_schedule_same_numbers(kernels):
    x = torch.randn(1, 256)
    w = torch.randn(96, 256).bfloat16()
    assert_close_scaled(kernels.linear(x, w, schedule="naive"), linear_reference(x, w), rtol=1e-5)


@pytest.mark.parametrize("m", [2, 3, 17, 150])
def test_widened_bf16_activations_give_the_kernels_own_bits(kernels, m, monkeypatch):
    """bf16 x of more than one row runs the fp32-activation kernel and is rounded once after it:
    bit for bit what the bf16-activation kernel (its in-loop cast) gives, with bias and out=."""
    from specir.backends.tvm import linear as linear_module
    x = (torch.randn(m, 256) * 3).bfloat16()
    w = torch.randn(100, 256).bfloat16()
    bias = torch.randn(100).bfloat16()
    results = []
    for widen in (True, False):
        monkeypatch.setattr(linear_module, "WIDEN_BF16_ACTIVATIONS", widen)
        out = torch.empty(m, 100, dtype=torch.bfloat16)
        results.append((kernels.linear(x, w, bias), kernels.linear(x, w, bias, out=out), out))
    (a, a_out, a_buf), (e, e_out, _) = results
    assert a.dtype == torch.bfloat16 and a_out.data_ptr() == a_buf.data_ptr()
    assert torch.equal(a.view(torch.int16), e.view(torch.int16))
    assert torch.equal(a_out.view(torch.int16), e_out.view(torch.int16))
