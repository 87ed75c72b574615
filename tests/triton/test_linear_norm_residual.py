"""The linear kernels' RMSNorm prologue (`norm=(weight, eps)`) and residual epilogue (`residual=r`):
bit for bit `rms_norm(h)` followed by the plain linear call, then `add(r, y)`, for bf16 and BF12
weights, the GEMV (M = 1, every loop variant) and the skinny GEMM, and the standalone norm's
reduction against torch's float64 RMSNorm.

Runs the compiled kernels on a GPU, Triton's interpreter otherwise (shapes kept small for it).
"""
import pytest
import torch

from specir.backends.triton.add_kernel import add
from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
from specir.backends.triton.kernels.norm import add_rms_norm, rms_norm
from specir.bf12 import pack
from tests.triton.test_linear import CASES, as_bits, weights
from tests.triton.test_linear_swiglu import INTERPRETED

EPS = 1e-5


def hidden(m, k, device, dtype=torch.bfloat16):
    """Un-normalised rows with a wide spread of magnitudes (the norm's sum of squares needs them)."""
    scale = torch.logspace(-2, 2, k)[torch.randperm(k)]
    return (torch.randn(m, k) * scale).to(dtype).to(device)


def norm_weight(k, device, dtype=torch.bfloat16):
    return (torch.rand(k) + 0.5).to(dtype).to(device)


@pytest.mark.parametrize("m,n,k,config,with_bias", CASES if torch.cuda.is_available() else INTERPRETED)
def test_norm_prologue_and_residual_bits_equal_the_separate_launches(seed, device, kt, m, n, k, config, with_bias):
    w = weights(n, k, device)
    packed = pack(w).to(device)
    bias = torch.randn(n).to(torch.bfloat16).to(device) if with_bias else None
    h, g = hidden(m, k, device), norm_weight(k, device)
    r = torch.randn(m, n).to(torch.bfloat16).to(device)
    plain = linear_bf16(rms_norm(h, g, EPS, fixed_order=True), w, bias, config=config)
    for linear, weight in ((linear_bf16, w), (linear_bf12, packed)):
        normed = linear(h, weight, bias, norm=(g, EPS), out=kt.poisoned((m, n), h.dtype, device), config=config)
        assert torch.equal(as_bits(normed), as_bits(plain)), linear.__name__
        both = linear(h, weight, bias, norm=(g, EPS), residual=r, out=kt.poisoned((m, n), h.dtype, device),
                      config=config)
        assert torch.equal(as_bits(both), as_bits(add(r, plain))), linear.__name__
    x = rms_norm(h, g, EPS)
    residual_only = linear_bf16(x, w, bias, residual=r, config=config)
    assert torch.equal(as_bits(residual_only), as_bits(add(linear_bf16(x, w, bias, config=config), r)))


@pytest.mark.parametrize("m", [1, 4])
def test_norm_prologue_with_fp32_activations_and_weight(seed, device, m):
    w = weights(48, 300, device)
    h, g = hidden(m, 300, device, torch.float32), norm_weight(300, device, torch.float32)
    expected = linear_bf16(rms_norm(h, g, EPS, fixed_order=True), w)
    assert torch.equal(as_bits(linear_bf16(h, w, norm=(g, EPS))), as_bits(expected))
    assert torch.equal(as_bits(linear_bf12(h, pack(w).to(device), norm=(g, EPS))), as_bits(expected))
    hb = h.to(torch.bfloat16)  # bf16 activations with an fp32 norm weight: element loads, same bits
    assert torch.equal(as_bits(linear_bf16(hb, w, norm=(g, EPS))), as_bits(linear_bf16(rms_norm(hb, g, EPS, fixed_order=True), w)))


@pytest.mark.parametrize("k", [1, 7, 256, 1000, 4096])
def test_norm_matches_float64_rms_norm(seed, device, k):
    """The fixed-order reduction is still RMSNorm: within one rounding of the activation dtype of
    float64 HF-order RMSNorm, and the add + norm kernel gives the same bits on the summed row."""
    h, g = hidden(3, k, device), norm_weight(k, device)
    h64 = h.double()
    normed = (h64 * torch.rsqrt(h64.pow(2).mean(-1, keepdim=True) + EPS)).to(torch.bfloat16).double()
    expected = (g.double() * normed)
    got = rms_norm(h, g, EPS, fixed_order=True).double()
    assert torch.allclose(got, expected, rtol=2 ** -7, atol=0)
    half = (h / 2).to(torch.bfloat16)
    summed_norm, summed = add_rms_norm(half, h - half, g, EPS)
    assert torch.equal(as_bits(summed_norm), as_bits(rms_norm(summed, g, EPS)))


def test_prologue_errors(seed, device):
    w = weights(24, 256, device, raw_row=False)
    h, g = hidden(2, 256, device), norm_weight(256, device)
    with pytest.raises(ValueError, match="one prologue"):
        linear_bf16(h, w, up=h, norm=(g, EPS))
    with pytest.raises(ValueError, match="norm weight"):
        linear_bf16(h, w, norm=(g[:128], EPS))
    with pytest.raises(ValueError, match="residual"):
        linear_bf16(h, w, residual=torch.zeros(2, 25, dtype=h.dtype, device=device))
