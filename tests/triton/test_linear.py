"""Triton linear kernels: BF12 output bits == bf16 kernel output bits; bf16 kernel vs fp64.

Runs the compiled kernels on a GPU, Triton's interpreter otherwise (shapes kept small for it).
Weights mix Gaussian values with zeros, subnormals, far-below-window escapes and one row that
BF12 keeps raw; every output starts poisoned (NaN) to catch unwritten elements.
"""
import pytest
import torch

from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
from specir.backends.triton.kernels.linear_config import LinearConfig, choose
from specir.bf12 import pack, unpack

GEMV = lambda bn, split, **kw: LinearConfig("gemv", bn, 1, split, **kw)
GEMM = lambda bm, bn, g, split, **kw: LinearConfig("gemm", bn, g, split, bm, **kw)


def weights(n, k, device, raw_row=True):
    w = torch.randn(n, k) * 0.02
    w[0, : min(k, 5)] = 0.0
    w[1 % n, k // 2] = -0.0
    w[2 % n, k - 1] = 1e-39          # subnormal
    w[3 % n, k // 3] = 3e-30         # far below the window: an escape
    w = w.to(torch.bfloat16)
    if raw_row and n > 5 and k > 130:
        w[5, 1], w[5, 2] = 1e-30, 1e-36  # two far exponents in one group: the row stays raw
    return w.to(device)


def as_bits(t):
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


def reference(x, w, bias):
    y = x.double() @ w.double().T
    return y + bias.double() if bias is not None else y


CASES = [  # m, n, k, config (None: the heuristic table), bias
    (1, 64, 512, None, False),
    (1, 96, 300, GEMV(32, 2), True),        # ragged K, split-K, tail in the last split
    (1, 40, 257, GEMV(32, 2), False),       # odd K: bf16 read element by element
    (1, 33, 128, GEMV(64, 1), True),        # N < block, one group
    (1, 64, 640, GEMV(32, 2, prefetch=False), False),  # the GEMV loop without prefetch
    (1, 64, 512, GEMV(64, 1, x_late=True), True),       # x loaded at compute time
    (1, 64, 512, GEMV(64, 1, fuse_raw=False), False),   # raw rows in a second launch
    (1, 40, 128 * 5 + 44, GEMV(32, 1, depth=2, x_late=True), True),  # depth 2: one pass, 2 left, tail
    (1, 40, 128 * 7, GEMV(32, 2, depth=2), False),      # depth 2: splits of 4 and 3 iterations
    (1, 40, 128 * 9 + 6, GEMV(32, 3, depth=2, x_late=True, maxnreg=128), False),  # 4, 4, 1 + tail
    (1, 40, 128 * 8, GEMV(32, 1, depth=2, fuse_raw=False), False),  # depth 2: two passes, 2 left
    (1, 64, 512, GEMV(64, 1, x_late=True, weight_cache="cg"), True),  # weights loaded L2-only
    (1, 40, 128 * 7, GEMV(32, 2, depth=2, weight_cache="evict_first"), False),  # weights L1 evict-first
    (1, 96, 300, GEMV(32, 2, persistent=1), True),   # persistent: 6 (BF12: 8) items, 4 programs
    (3, 40, 300, None, True),               # skinny GEMM (table: y^T = w x^T), ragged
    (70, 40, 300, None, False),             # M > 64 (table: block_m 128, y^T = w x^T)
    (5, 64, 640, GEMM(16, 64, 1, 2), False),
    (2, 24, 384, GEMM(16, 32, 2, 2), True),  # 3 groups, BK = 256: masked tail iteration, missing group
    (6, 40, 300, GEMM(16, 32, 1, 2, swap_ab=True), False),
    (1, 40, 300, GEMM(16, 64, 1, 1, swap_ab=True), True),  # M = 1 on the MMA path
    (37, 136, 300, GEMM(16, 32, 1, 2, swap_ab=True, m_fastest=True), True),  # row tiles first: 3 x 2 x 5 grid
]


@pytest.mark.parametrize("m,n,k,config,with_bias", CASES)
def test_bf12_bits_equal_bf16_bits(seed, device, kt, m, n, k, config, with_bias):
    w = weights(n, k, device)
    packed = pack(w).to(device)
    assert torch.equal(as_bits(unpack(packed)), as_bits(w))
    x = torch.randn(m, k).to(torch.bfloat16).to(device)
    bias = torch.randn(n).to(torch.bfloat16).to(device) if with_bias else None
    y16 = linear_bf16(x, w, bias, out=kt.poisoned((m, n), x.dtype, device), config=config)
    y12 = linear_bf12(x, packed, bias, out=kt.poisoned((m, n), x.dtype, device), config=config)
    kt.close(y16, reference(x, w, bias).to(x.dtype), dtype=torch.bfloat16)
    assert torch.equal(as_bits(y12), as_bits(y16))


@pytest.mark.parametrize("m,n,k,config", [(1, 48, 300, GEMV(32, 2)), (4, 48, 300, GEMM(16, 32, 1, 2)),
                                          (4, 48, 300, GEMM(16, 64, 1, 2, swap_ab=True))])
def test_fp32_activations(seed, device, kt, m, n, k, config):
    w = weights(n, k, device)
    packed = pack(w).to(device)
    x = torch.randn(m, k, device=device)
    bias = torch.randn(n, device=device)
    y16 = linear_bf16(x, w, bias, out=kt.poisoned((m, n), x.dtype, device), config=config)
    y12 = linear_bf12(x, packed, bias, out=kt.poisoned((m, n), x.dtype, device), config=config)
    assert y16.dtype == torch.float32
    kt.close(y16, reference(x, w, bias).float(), tol=1e-5)
    assert torch.equal(as_bits(y12), as_bits(y16))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's numpy: inf * 0
def test_special_values_propagate_identically(seed, device):
    w = weights(32, 256, device, raw_row=False)
    w[7, 9] = float("inf")
    w[8, 10] = float("nan")
    w[9, 11] = -3e38
    packed = pack(w).to(device)
    x = torch.randn(1, 256).to(torch.bfloat16).to(device)
    y16, y12 = linear_bf16(x, w), linear_bf12(x, packed)
    assert torch.equal(as_bits(y12), as_bits(y16))
    assert torch.isnan(y16[0, 7:9]).all() or torch.isinf(y16[0, 7])
    assert torch.isfinite(y16[0, 10:]).all()


def test_leading_dims_and_allocation(seed, device, kt):
    w = weights(24, 256, device, raw_row=False)
    x = torch.randn(2, 3, 256).to(torch.bfloat16).to(device)
    y = linear_bf16(x, w)
    assert y.shape == (2, 3, 24) and y.dtype == torch.bfloat16
    kt.close(y, reference(x.view(6, 256), w, None).view(2, 3, 24).to(x.dtype))
    assert torch.equal(as_bits(linear_bf12(x, pack(w).to(device))), as_bits(y))


def test_errors(device):
    w = weights(8, 128, device, raw_row=False)
    with pytest.raises(ValueError):
        linear_bf16(torch.zeros(1, 64, device=device, dtype=torch.bfloat16), w)
    with pytest.raises(ValueError):
        linear_bf16(torch.zeros(1, 128, device=device), w.float())
    with pytest.raises(ValueError):
        linear_bf16(torch.zeros(1, 128, device=device, dtype=torch.bfloat16), w, torch.zeros(3, device=device))


@pytest.mark.parametrize("fused", ["plain", "norm+residual", "swiglu"])
@pytest.mark.parametrize("packed", [False, True], ids=["bf16", "bf12"])
def test_a_persistent_grid_gives_the_plain_grids_bits(seed, device, kt, fused, packed):
    """LinearConfig.persistent: P programs doing the plain grid's (row block, K range) items in turn give
    that grid's bits, with the prologues and the residual epilogue, and BF12's raw rows in the launch."""
    from dataclasses import replace

    from tests.triton.test_linear_norm_residual import EPS, hidden, norm_weight
    n, k = 200, 128 * 6 + 44
    w = weights(n, k, device)
    matrix = pack(w).to(device) if packed else w
    assert not packed or matrix.raw_row_count > 0
    linear = linear_bf12 if packed else linear_bf16
    x = hidden(1, k, device)
    extra = {}
    if fused == "norm+residual":
        extra = dict(norm=(norm_weight(k, device), EPS), residual=hidden(1, n, device))
    elif fused == "swiglu":
        extra = dict(up=hidden(1, k, device))
    plain = GEMV(32, 2)
    want = linear(x, matrix, out=kt.poisoned((1, n), x.dtype, device), config=plain, **extra)
    for per_sm in (1, 3):   # 4 and 12 programs (the interpreter's 4 SMs) for 14 items (16 with BF12's raw row)
        got = linear(x, matrix, out=kt.poisoned((1, n), x.dtype, device), config=replace(plain, persistent=per_sm),
                     **extra)
        assert torch.equal(as_bits(got), as_bits(want)), per_sm


@pytest.mark.parametrize("packed", [False, True], ids=["bf16", "bf12"])
def test_row_tiles_first_gives_the_plain_grids_bits(seed, device, kt, packed):
    """LinearConfig.m_fastest launches the GEMM's tiles in another order (a weight block's row tiles together):
    the same bits, with split-K (the tiles' arrival counters), the norm prologue and the residual epilogue. The
    interpreter runs a grid's programs in order, so colliding counters show only on a GPU (this test runs there too)."""
    from dataclasses import replace

    from tests.triton.test_linear_norm_residual import EPS, hidden, norm_weight
    n, k = 136, 128 + 44   # 3 row tiles x 5 weight blocks: a tile number mixing the two axes would collide
    w = weights(n, k, device)
    matrix = pack(w).to(device) if packed else w
    linear = linear_bf12 if packed else linear_bf16
    x = hidden(37, k, device)
    extra = dict(norm=(norm_weight(k, device), EPS), residual=hidden(37, n, device))
    plain = GEMM(16, 32, 1, 2, swap_ab=True)
    want = linear(x, matrix, out=kt.poisoned((37, n), x.dtype, device), config=plain, **extra)
    got = linear(x, matrix, out=kt.poisoned((37, n), x.dtype, device), config=replace(plain, m_fastest=True), **extra)
    assert torch.equal(as_bits(got), as_bits(want))


@pytest.mark.parametrize("m,config", [(1, GEMV(64, 4)), (16, GEMM(16, 64, 1, 4, swap_ab=True))], ids=["gemv", "gemm"])
def test_an_empty_k_range_adds_nothing(seed, device, kt, m, config):
    """K = 128 * 4 + 16: 5 groups in 4 ranges of 2, so the last range is empty (as 129 groups at split 16 are).
    Weights only in the masked tail group: the tail is summed once (the empty range summed it again, doubling y),
    in both formats."""
    n, k = 64, 128 * 4 + 16
    w = torch.zeros(n, k)
    w[:, -16:] = torch.randn(n, 16) * 0.5
    w = w.to(torch.bfloat16).to(device)
    x = torch.randn(m, k, device=device).to(torch.bfloat16)
    y16 = linear_bf16(x, w, out=kt.poisoned((m, n), x.dtype, device), config=config)
    y12 = linear_bf12(x, pack(w).to(device), out=kt.poisoned((m, n), x.dtype, device), config=config)
    torch.testing.assert_close(y16.double(), reference(x, w, None), rtol=1e-2, atol=1e-2)
    assert torch.equal(as_bits(y16), as_bits(y12))


def test_an_unknown_weight_cache_policy_is_refused():
    with pytest.raises(ValueError, match="weight_cache 'lru'"):
        GEMV(64, 1, weight_cache="lru")


def test_a_measured_gemm_tile_serves_every_format(seed, device, kt, monkeypatch):
    """linear_config.GEMM_TILES replaces the rule's tiling for a (row band, N, K): both formats take it, so a
    BF12 GEMM still gives the bf16 kernel's bits, rows past the band's first tile included."""
    from specir.backends.triton.kernels import linear_config

    n, k = 72, 128 * 3 + 44
    tile = dict(block_m=16, block_n=32, split=2, m_fastest=True)
    monkeypatch.setitem(linear_config.GEMM_TILES, (64, n, k), tile)
    w = weights(n, k, device)
    x = torch.randn(40, k, device=device).to(torch.bfloat16)
    for fmt in ("bf16", "bf12"):
        cfg = choose(40, n, k, fmt)
        assert (cfg.block_m, cfg.block_n, cfg.split, cfg.m_fastest) == (16, 32, 2, True)
    assert choose(70, n, k).block_m == 128   # another band keeps the rule
    monkeypatch.setitem(linear_config.GEMM_TILES, (128, n, k), tile)
    assert choose(100, n, k).block_m == 16 and choose(2048, n, k) == choose(2048, n, k, "bf12")
    assert choose(2048, n, k).block_m == 128   # a prefill past the measured band keeps the rule
    y16 = linear_bf16(x, w, out=kt.poisoned((40, n), x.dtype, device))
    y12 = linear_bf12(x, pack(w).to(device), out=kt.poisoned((40, n), x.dtype, device))
    assert torch.equal(as_bits(y16), as_bits(y12))
    torch.testing.assert_close(y16.double(), reference(x, w, None), rtol=2e-2, atol=2e-2)


def test_config_order_fields_do_not_depend_on_format():
    for m in (1, 8, 16, 64, 128):
        for n, k in ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (128256, 4096), (40, 300)):
            assert choose(m, n, k, "bf16").order_key() == choose(m, n, k, "bf12").order_key()
