"""The linear kernels' SwiGLU prologue (`linear_bf16/linear_bf12(gate, w, bias, up=up)`): bit for bit
`silu_mul(gate, up)` followed by the same linear call without `up`, for bf16 and BF12 weights, the
GEMV (M = 1, every loop variant) and the skinny GEMM, gate/up as one [gate | up] buffer or apart.

Runs the compiled kernels on a GPU, Triton's interpreter otherwise (shapes kept small for it).
"""
import pytest
import torch

from specir.backends.triton.kernels.activation import silu_mul
from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
from specir.bf12 import pack
from tests.triton.test_linear import CASES, as_bits, weights


def gate_up(m, k, device, dtype=torch.bfloat16, joined=True):
    """(gate, up) [m, k]: views of one [m, 2k] buffer ([gate | up], a fused gate/up projection's
    output) or two tensors. Gate values reach the saturating ends of silu."""
    both = (torch.randn(m, 2 * k) * 3).to(dtype).to(device)
    if joined:
        return both[:, :k], both[:, k:]
    return both[:, :k].contiguous(), both[:, k:].contiguous()


# every loop variant on a GPU; under the interpreter one case per code path (CI time): split-K with
# a ragged tail, odd K, x loaded late, raw rows apart, depth 2 with a tail, skinny GEMM, its masked
# tail iteration, swap_ab
INTERPRETED = [CASES[i] for i in (1, 2, 5, 6, 7, 11, 14, 15)]


@pytest.mark.parametrize("m,n,k,config,with_bias", CASES if torch.cuda.is_available() else INTERPRETED)
def test_prologue_bits_equal_silu_mul_then_linear(seed, device, kt, m, n, k, config, with_bias):
    w = weights(n, k, device)
    packed = pack(w).to(device)
    bias = torch.randn(n).to(torch.bfloat16).to(device) if with_bias else None
    for joined in (True, False):
        gate, up = gate_up(m, k, device, joined=joined)
        act = silu_mul(gate, up)
        expected = linear_bf16(act, w, bias, config=config)
        fused16 = linear_bf16(gate, w, bias, up=up, out=kt.poisoned((m, n), gate.dtype, device), config=config)
        fused12 = linear_bf12(gate, packed, bias, up=up, out=kt.poisoned((m, n), gate.dtype, device), config=config)
        assert torch.equal(as_bits(fused16), as_bits(expected)), joined
        assert torch.equal(as_bits(fused12), as_bits(expected)), joined


@pytest.mark.parametrize("m", [1, 4])
def test_prologue_with_fp32_activations(seed, device, m):
    w = weights(48, 300, device)
    gate, up = gate_up(m, 300, device, dtype=torch.float32)
    expected = linear_bf16(silu_mul(gate, up), w)
    assert torch.equal(as_bits(linear_bf16(gate, w, up=up)), as_bits(expected))
    assert torch.equal(as_bits(linear_bf12(gate, pack(w).to(device), up=up)), as_bits(expected))


def test_prologue_leading_dims_and_errors(seed, device):
    w = weights(24, 256, device, raw_row=False)
    both = (torch.randn(2, 3, 512) * 3).to(torch.bfloat16).to(device)
    gate, up = both[..., :256], both[..., 256:]
    y = linear_bf16(gate, w, up=up)
    assert y.shape == (2, 3, 24)
    assert torch.equal(as_bits(y), as_bits(linear_bf16(silu_mul(gate, up), w)))
    with pytest.raises(ValueError):
        linear_bf16(gate, w, up=up[..., :128])
    with pytest.raises(ValueError):
        linear_bf16(gate, w, up=up.float())
