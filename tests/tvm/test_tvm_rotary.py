"""Rotary embedding at arbitrary positions against the HF-order torch twin."""

import pytest
import torch

from specir.backends.tvm.reference import rotary_reference


def _inv_freq(head_dim, theta=500000.0):
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))


@pytest.mark.parametrize("tokens", [5, 110])  # 2 x 110 tokens: the parallel variant
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_arbitrary_positions(kernels, dtype, tokens):
    heads, kv_heads, d = 8, 2, 64
    q = torch.randn(2, tokens, heads, d).to(dtype)
    k = torch.randn(2, tokens, kv_heads, d).to(dtype)
    pos = torch.randint(0, 100_000, (2, tokens))  # tree positions need not be contiguous
    qo, ko = kernels.rotary(q, k, pos, _inv_freq(d))
    rq, rk = rotary_reference(q, k, pos, _inv_freq(d))
    assert qo.shape == q.shape and ko.shape == k.shape
    if dtype == torch.float32:  # libm vs torch sin/cos: ~1 ulp at angles up to 1e5 rad
        torch.testing.assert_close(qo, rq, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ko, rk, rtol=1e-5, atol=1e-5)
    else:  # a 1-ulp fp32 cos/sin difference may flip one bf16 rounding
        torch.testing.assert_close(qo.float(), rq.float(), rtol=0, atol=2**-6)
        assert (qo != rq).float().mean() < 0.01


def test_rotary_strided_views_scaling_and_in_place(kernels):
    """q and k sliced out of a fused qkv projection are read without a copy; with q_out=q the
    rotation is in place; attention_scaling multiplies cos and sin (yarn/longrope)."""
    heads, kv_heads, d = 4, 2, 32
    qkv = torch.randn(7, (heads + 2 * kv_heads) * d)
    q = qkv[:, : heads * d].view(7, heads, d)
    k = qkv[:, heads * d: (heads + kv_heads) * d].view(7, kv_heads, d)
    pos = torch.arange(7) * 3
    rq, rk = rotary_reference(q.clone(), k.clone(), pos, _inv_freq(d, 10000.0), 1.2)
    kernels.rotary(q, k, pos, _inv_freq(d, 10000.0), 1.2, q_out=q, k_out=k)
    torch.testing.assert_close(q, rq, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(k, rk, rtol=1e-5, atol=1e-6)
