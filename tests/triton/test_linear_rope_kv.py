"""The rope + KV write in the q|k|v GEMV's epilogue (kernels/rope_kv_epilogue.py, `rope_kv=`): bit for
bit the plain linear call followed by rope.rope_kv_write, for bf16 and BF12 weights, with bias,
split-K, the RMSNorm prologue, a persistent grid, cache slots, offsets and a packed forward's row count; a cache row
past max_seq and a pad-only forward (n_rows 0) write nothing; a call the epilogue cannot serve
says why. Runs the compiled kernels on a GPU, Triton's interpreter otherwise.
"""
import pytest
import torch

from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
from specir.backends.triton.kernels.linear_config import LinearConfig, choose
from specir.backends.triton.kernels.rope import rope_kv_write
from specir.backends.triton.kernels.rope_kv_epilogue import RopeKV
from specir.bf12 import pack
from tests.triton.test_linear import as_bits
from tests.triton.test_linear_norm_residual import EPS, hidden, norm_weight
from tests.triton.test_triton_rope import _inv_freq

GPU = torch.cuda.is_available()
SHAPES = [(4, 2, 16, 96), (2, 1, 32, 300)] + ([(32, 8, 128, 4096)] if GPU else [])  # H, KH, D, K


def weights(n, k, device):
    """Weights of magnitude 0.005 .. 0.04 and random sign: BF12 packs every row (a Gaussian's values
    near 0 can leave a row raw)."""
    sign = torch.randint(0, 2, (n, k)) * 2 - 1
    return ((torch.rand(n, k) * 0.035 + 0.005) * sign).to(torch.bfloat16).to(device)


def _case(device, H, KH, D, slots_offsets):
    S = 12
    caches = [torch.randn(3, KH, S, D).to(torch.bfloat16).to(device) for _ in range(2)]  # rows not written stay
    lens = torch.tensor([5], dtype=torch.int32, device=device)
    pos = torch.tensor([[1234]], dtype=torch.int64, device=device)
    extra = {}
    if slots_offsets:
        extra = dict(slots=torch.tensor([2], dtype=torch.int32, device=device),
                     offsets=torch.tensor([3], dtype=torch.int32, device=device),
                     n_rows=torch.tensor([1], dtype=torch.int32, device=device))
    return caches, lens, pos, _inv_freq(D).to(device), extra


def _reference(y, H, KH, D, caches, lens, pos, inv_freq, extra, scaling=0.875):
    """The plain call's output y [1, (H + 2 KH) D], then rope_kv_write: (q_out, k_cache, v_cache)."""
    k_cache, v_cache = (c.clone() for c in caches)
    q = y[:, : H * D].view(1, 1, H, D)
    k = y[:, H * D: (H + KH) * D].view(1, 1, KH, D)
    v = y[:, (H + KH) * D:].view(1, 1, KH, D)
    q_out = rope_kv_write(q, k, v, pos, inv_freq, k_cache, v_cache, lens, scaling, **extra)
    return q_out.reshape(1, H * D), k_cache, v_cache


@pytest.mark.parametrize("H,KH,D,K", SHAPES)
@pytest.mark.parametrize("packed", [False, True], ids=["bf16", "bf12"])
@pytest.mark.parametrize("variant", ["plain", "bias+split+slots", "norm", "persistent"])
def test_epilogue_bits_equal_linear_then_rope_kv_write(seed, device, kt, H, KH, D, K, packed, variant):
    n = (H + 2 * KH) * D
    w = weights(n, K, device)
    matrix = pack(w).to(device) if packed else w
    assert not packed or matrix.raw_row_count == 0
    linear = linear_bf12 if packed else linear_bf16
    x = hidden(1, K, device)
    bias = torch.randn(n).to(torch.bfloat16).to(device) if variant == "bias+split+slots" else None
    norm = (norm_weight(K, device), EPS) if variant == "norm" else None
    config = {"bias+split+slots": LinearConfig("gemv", 32, 1, 2),
              "persistent": LinearConfig("gemv", 32, 1, 2, persistent=1)}.get(variant, choose(1, n, K, "bf16"))
    caches, lens, pos, inv_freq, extra = _case(device, H, KH, D, variant == "bias+split+slots")
    y = linear(x, matrix, bias, norm=norm, config=config)
    want_q, want_k, want_v = _reference(y, H, KH, D, caches, lens, pos, inv_freq, extra)
    k_cache, v_cache = (c.clone() for c in caches)
    out = kt.poisoned((1, n), torch.bfloat16, device)
    rope_kv = RopeKV(H, KH, pos, inv_freq, 0.875, k_cache, v_cache, lens, **extra)
    linear(x, matrix, bias, norm=norm, config=config, out=out, rope_kv=rope_kv)
    _assert_same_bits(out[:, : H * D].reshape(H, D), want_q.reshape(H, D), "q", D)
    _assert_same_bits(k_cache, want_k, "k cache", D)
    _assert_same_bits(v_cache, want_v, "v cache", D)


def _assert_same_bits(got, want, what, head_dim):
    """Bit equality, or a message that says where they differ (which columns of the head, how many
    values): one GPU run then tells a rotation bug from a reduction or a store bug."""
    diff = as_bits(got) != as_bits(want)
    if diff.any():
        cols = sorted({int(c) for c in diff.reshape(-1, head_dim).nonzero()[:, 1].tolist()})
        worst = (got.float() - want.float()).abs().max().item()
        raise AssertionError(f"{what}: {int(diff.sum())} of {diff.numel()} values differ, in head columns "
                             f"{cols[:12]}{'...' if len(cols) > 12 else ''}, max |diff| {worst:.3g}")


@pytest.mark.parametrize("where", ["past max_seq", "pad rows only"])
def test_a_row_past_the_cache_or_a_pad_forward_writes_no_cache(seed, device, where):
    H, KH, D, K = 2, 1, 16, 128
    w = weights((H + 2 * KH) * D, K, device)
    caches, lens, pos, inv_freq, extra = _case(device, H, KH, D, True)
    if where == "past max_seq":
        lens.fill_(caches[0].shape[2] - 3)           # + offsets 3 = max_seq
    else:
        extra["n_rows"].fill_(0)
    k_cache, v_cache = (c.clone() for c in caches)
    x = hidden(1, K, device)
    y = linear_bf16(x, w)
    out = torch.empty_like(y)
    linear_bf16(x, w, out=out, rope_kv=RopeKV(H, KH, pos, inv_freq, 1.0, k_cache, v_cache, lens, **extra))
    assert torch.equal(k_cache, caches[0]) and torch.equal(v_cache, caches[1])
    want_q = _reference(y, H, KH, D, caches, lens, pos, inv_freq, extra, scaling=1.0)[0]
    assert torch.equal(as_bits(out[:, : H * D]), as_bits(want_q))  # q is still rotated


def test_a_call_the_epilogue_cannot_serve_says_why(device):
    H, KH, D, K = 2, 1, 16, 64
    w = weights((H + 2 * KH) * D, K, device)
    caches, lens, pos, inv_freq, _ = _case(device, H, KH, D, False)
    rope_kv = RopeKV(H, KH, pos, inv_freq, 1.0, *caches, lens)
    with pytest.raises(ValueError, match="2 rows"):
        linear_bf16(hidden(2, K, device), w, rope_kv=rope_kv)
    partial = RopeKV(H, KH, pos, _inv_freq(D // 2).to(device), 1.0, *caches, lens)
    with pytest.raises(ValueError, match="partial rotary"):
        linear_bf16(hidden(1, K, device), w, rope_kv=partial)
    with pytest.raises(ValueError, match=r"not q\|k\|v"):
        linear_bf16(hidden(1, K, device), w[:-1], rope_kv=rope_kv)
