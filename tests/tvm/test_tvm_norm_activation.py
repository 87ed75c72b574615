"""RMSNorm (plain and fused with the residual add) and SwiGLU against their torch twins."""

import pytest
import torch

from specir.backends.tvm.reference import rms_norm_reference, silu_mul_reference

# bf16 results rounded twice (HF order): a rare 1-ulp flip of the first rounding (fp32 sums in
# another order) can move the second by up to 2 ulps
BF16_TWO_ROUNDINGS = 2**-6


@pytest.mark.parametrize("rows", [6, 300])  # 300 x 256: the parallel variant
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm(kernels, dtype, rows):
    x = (torch.randn(rows // 3, 3, 256) * 3).to(dtype)
    w = (1 + 0.1 * torch.randn(256)).to(dtype)
    y = kernels.rms_norm(x, w, 1e-5)
    ref = rms_norm_reference(x, w, 1e-5)
    assert y.shape == x.shape and y.dtype == dtype
    if dtype == torch.float32:
        torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)
    else:  # fp32 math in another order: the bf16 roundings agree except on rare ties
        assert (y != ref).float().mean() < 0.01
        torch.testing.assert_close(y.float(), ref.float(), rtol=BF16_TWO_ROUNDINGS, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_add_rms_norm(kernels, dtype):
    x, res = torch.randn(5, 256).to(dtype), torch.randn(5, 256).to(dtype)
    w = (1 + 0.1 * torch.randn(256)).to(dtype)
    y, h = kernels.rms_norm(x, w, 1e-6, residual=res)
    ref_y, ref_h = rms_norm_reference(x, w, 1e-6, residual=res)
    torch.testing.assert_close(h, ref_h, rtol=0, atol=0)
    torch.testing.assert_close(y.float(), ref_y.float(), rtol=1e-5 if dtype == torch.float32 else BF16_TWO_ROUNDINGS, atol=1e-6)


def test_rms_norm_fp32_activations_bf16_weight(kernels):
    x, w = torch.randn(4, 256), (1 + 0.1 * torch.randn(256)).bfloat16()
    torch.testing.assert_close(kernels.rms_norm(x, w, 1e-6), rms_norm_reference(x, w, 1e-6), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows", [3, 130])  # 130 x 512: the parallel variant
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_mul_split_and_fused(kernels, dtype, rows):
    gate, up = (torch.randn(rows, 512) * 4).to(dtype), torch.randn(rows, 512).to(dtype)
    ref = silu_mul_reference(gate, up)
    y = kernels.silu_mul(gate, up)
    fused = kernels.silu_mul(torch.cat([gate, up], dim=-1))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=BF16_TWO_ROUNDINGS, atol=1e-6)
    torch.testing.assert_close(y.float(), ref.float(), **tol)
    torch.testing.assert_close(fused, y, rtol=0, atol=0)


def test_silu_large_magnitudes(kernels):
    """The polynomial exp saturates cleanly: no NaN/inf for |gate| up to 1e4."""
    gate = torch.tensor([[-1e4, -100.0, -88.0, -20.0, 0.0, 20.0, 88.0, 1e4]])
    up = torch.ones_like(gate)
    torch.testing.assert_close(kernels.silu_mul(gate, up), silu_mul_reference(gate, up), rtol=1e-5, atol=1e-30)
