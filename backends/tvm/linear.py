"""Linear layer `y[M, N] = x[M, K] @ w[N, K]^T (+ bias[N])`: decode GEMV (M = 1) and the skinny
GEMM of verification (M up to a few hundred), fp32 accumulation, one rounding on store.

`w` is the checkpoint's row-major [out, in] matrix, read through a `WeightFormat` (bf16 or fp32
dense today, a packed format later). x and y are in the activation dtype (fp32 or bf16).

Kernel shape (tiled schedule): the rows of x are grouped into blocks of `mr` rows (x is passed
as `[M / mr, mr, K]`, a free view; M is padded to a multiple of `mr` when needed), and the rows
of w into tiles of `nr`. One parallel task per w tile; for each x block it keeps `mr * nr`
fp32 vector accumulators of `vl` lanes, walks K in steps of `vl`, decodes the `[nr, vl]` weight
tile in registers (bf16 -> fp32 is a shift), and does `mr * nr` vector FMAs. The lanes are summed
once at the end (rfactor), then bias and the cast. The weight tile stays in L1 across x blocks,
so the weights are read from memory once whatever M is.

M is symbolic (`M / mr` is a runtime size), so a kernel is compiled once per (N, K, formats,
dtypes, tile, parallel?) and serves every token count; calls under PARALLEL_MIN_MACS
multiply-adds run on one thread. Two tiles are used: a GEMV tile (mr = 1) for M = 1
and a GEMM tile for M > 1. `schedule="naive"` compiles the same computation without a schedule
(serial loops): the benchmark's baseline for what scheduling buys.

bf16 activations of more than one row are widened to fp32 before the call and the fp32 result
rounded once after it (round to nearest even, as the kernel's own cast): the same bits as the
bf16-activation kernel, whose in-loop cast of x does not vectorise (3-4x slower at prefill sizes).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from .alignment import aligned
from .host_target import parallel_allowed
from .weight_formats import WeightFormat, weight_format_for

_ACT_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}


@dataclass(frozen=True)
class LinearTile:
    mr: int  # x rows per register tile
    nr: int  # w rows per register tile
    vl: int  # K lanes per vector accumulator


def _largest_divisor(n: int, candidates) -> int:
    return next((c for c in candidates if n % c == 0), 1)


@functools.lru_cache(maxsize=None)
def choose_tile(m: int, n: int, k: int, fp32_lanes: int, k_multiple: int = 1) -> LinearTile:
    """Register tile for one call: (1, 8, lanes) for a GEMV (8 accumulators, one x vector,
    decoded w vectors), (2, 4, lanes) for M > 1 (8 accumulators, 2 x vectors, 4 w vectors: fits
    the 16 ymm registers of AVX2). Chosen on Zen 3 by single-thread CPU-time comparisons (the
    shared machine makes wall-clock sweeps noisy: bench/results/cpu_kernels_sweep.md); tiles with
    more than 8 accumulators spill."""
    vl = _largest_divisor(k, [fp32_lanes, 8, 4, 2])
    if k_multiple > 1 and k_multiple % vl:
        vl = _largest_divisor(k_multiple, [vl, 8, 4, 2])
    if m == 1:
        return LinearTile(1, _largest_divisor(n, [8, 4, 2]), vl)
    return LinearTile(2, _largest_divisor(n, [4, 2]), vl)


PARALLEL_MIN_MACS = 1 << 19  # below ~1 MB of bf16 weights a parallel launch costs more than it gains
WIDEN_BF16_ACTIVATIONS = True  # bf16 x of > 1 row runs the fp32-activation kernel (same bits; tests compare)


def build_linear(n: int, k: int, fmt: WeightFormat, act_dtype: str, bias_dtype: str | None,
                 tile: LinearTile, schedule: str = "tiled", parallel: bool = True):
    """The PrimFunc `(x[mb, mr, K], *weights, [bias[N]], y[mb, mr, N])`, mb symbolic; with
    mr = 1 plain `x[M, K]` and `y[M, N]` (no views to make: the GEMV call stays cheap)."""
    from tvm import s_tir, te, tirx

    mb = tirx.Var("mb", "int64")
    flat = tile.mr == 1
    x = te.placeholder((mb, k) if flat else (mb, tile.mr, k), act_dtype, name="x")
    weights = fmt.placeholders(n, k)
    w_dec = te.compute((n, k), lambda j, kk: fmt.decode(weights, j, kk), name="w_decode")
    r = te.reduce_axis((0, k), name="k")

    def x_at(mo, mi, kk):
        return (x[mo, kk] if flat else x[mo, mi, kk]).astype("float32")

    acc = te.compute(
        (mb, tile.mr, n),
        lambda mo, mi, j: te.sum(x_at(mo, mi, r) * w_dec[j, r], axis=r),
        name="acc",
    )
    inputs = [x, *weights]
    if bias_dtype is not None:
        bias = te.placeholder((n,), bias_dtype, name="bias")
        inputs.append(bias)

    def store(mo, mi, j):
        value = acc[mo, mi, j] if bias_dtype is None else acc[mo, mi, j] + bias[j].astype("float32")
        return value.astype(act_dtype)

    if flat:
        y = te.compute((mb, n), lambda mo, j: store(mo, 0, j), name="y")
    else:
        y = te.compute(acc.shape, store, name="y")
    func = te.create_prim_func([*inputs, y])
    if schedule == "naive":
        return func
    if schedule != "tiled":
        raise ValueError(f"unknown linear schedule {schedule!r}")

    sch = s_tir.Schedule(func)
    acc_block = sch.get_sblock("acc")
    y_block = sch.get_sblock("y")
    decode_block = sch.get_sblock("w_decode")
    mo, mi, j, kk = sch.get_loops(acc_block)
    k_outer, k_lane = sch.split(kk, [None, tile.vl])
    lanes_block = sch.rfactor(k_lane, factor_axis=3)  # acc_rf[mo, mi, n, lane]
    mo, mi, j, k_outer, k_lane = sch.get_loops(lanes_block)
    j_tile, j_in = sch.split(j, [None, tile.nr])
    sch.reorder(j_tile, mo, k_outer, mi, j_in, k_lane)
    if parallel:
        sch.parallel(j_tile)
    sch.unroll(mi)
    sch.unroll(j_in)
    sch.vectorize(k_lane)
    sch.set_scope(lanes_block, 0, "local")
    # weight-decode stage: one [nr, vl] tile per K step, in registers
    sch.compute_at(decode_block, k_outer)
    sch.set_scope(decode_block, 0, "local")
    d_rows, d_lanes = sch.get_loops(decode_block)[-2:]
    sch.unroll(d_rows)
    sch.vectorize(d_lanes)
    # lane sums, bias and cast once per (x block, w tile)
    sch.reverse_compute_at(acc_block, mo)
    sch.set_scope(acc_block, 0, "local")
    sch.reverse_compute_at(y_block, mo)
    sch.decompose_reduction(lanes_block, k_outer)
    return sch.mod["main"]


def _plan(cache, x, weight, bias, schedule, tile, m):
    """(function, format, N, tile) for one call signature; validates the shapes."""
    fmt = weight_format_for(weight)
    n, k = fmt.shape(weight)
    if x.shape[-1] != k:
        raise ValueError(f"linear: x has K={x.shape[-1]}, weight has K={k}")
    if x.dtype not in _ACT_DTYPES:
        raise ValueError(f"linear: activations must be fp32 or bf16, got {x.dtype}")
    if bias is not None and bias.shape != (n,):
        raise ValueError(f"linear: bias shape {tuple(bias.shape)} != ({n},)")
    tile = tile or choose_tile(min(m, 2), n, k, cache.host.fp32_lanes, fmt.k_multiple)
    act = _ACT_DTYPES[x.dtype]
    bias_dtype = None if bias is None else _ACT_DTYPES[bias.dtype]
    parallel = parallel_allowed() and m * n * k >= PARALLEL_MIN_MACS
    params = {"n": n, "k": k, "weights": fmt.cache_key(), "act": act, "bias": bias_dtype,
              "tile": (tile.mr, tile.nr, tile.vl), "schedule": schedule, "parallel": parallel}
    fn = cache.get("linear", params, lambda: build_linear(n, k, fmt, act, bias_dtype, tile, schedule, parallel))
    return fn, fmt, n, tile


def linear(cache, x: torch.Tensor, weight, bias: torch.Tensor | None = None, *,
           out: torch.Tensor | None = None, schedule: str = "tiled", tile: LinearTile | None = None) -> torch.Tensor:
    """y = x @ w^T (+ bias) on the CPU; x [..., K] in fp32 or bf16, w a bf16/fp32 `[N, K]` tensor
    (or a packed weight object with a TVM format). Returns y [..., N] in x's dtype."""
    k = x.shape[-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, k)  # torch ops cost microseconds: do few
    act = x.dtype
    if act == torch.bfloat16 and x2.shape[0] > 1 and WIDEN_BF16_ACTIVATIONS:
        # the register-tile kernel's per-element bf16 -> fp32 cast of x does not vectorise (3-4x
        # slower than fp32 activations at 150 rows, 2x at 4): widen x once (exact) and round y once
        # at the end: the same bits. One row (the GEMV) gains less than the two extra torch ops cost.
        x2 = x2.float()
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    x2 = aligned(x2)
    m = x2.shape[0]
    dense = isinstance(weight, torch.Tensor)
    plan_key = ("linear", x2.dtype, m, k, weight.dtype, weight.shape[0], None if bias is None else bias.dtype,
                schedule, tile, parallel_allowed()) if dense else None
    plan = cache.plans.get(plan_key) if dense else None
    if plan is None:
        plan = _plan(cache, x2, weight, bias, schedule, tile, m)
        if dense:
            cache.plans[plan_key] = plan
    fn, fmt, n, tile = plan

    args = [*fmt.kernel_args(weight)]
    if bias is not None:
        args.append(aligned(bias if bias.is_contiguous() else bias.contiguous()))
    kd = x2.dtype  # the kernel's activation dtype: x's, or fp32 for widened bf16
    if tile.mr == 1:  # the GEMV path: no padding, no views
        y = out if out is not None and out.is_contiguous() and out.dtype == kd else torch.empty(m, n, dtype=kd)
        fn(x2, *args, y if y.dim() == 2 else y.view(m, n))
    else:
        m_pad = -(-m // tile.mr) * tile.mr
        if m_pad != m:
            x_pad = x2.new_zeros(m_pad, k)
            x_pad[:m] = x2
            x2 = x_pad
        direct = out is not None and m_pad == m and out.is_contiguous() and out.dtype == kd
        y = out if direct else torch.empty(m_pad, n, dtype=kd)
        fn(x2.view(m_pad // tile.mr, tile.mr, k), *args, y.view(m_pad // tile.mr, tile.mr, n))
        if m_pad != m:
            y = y[:m]
    if out is not None:
        if y is not out:
            out.copy_(y.view(out.shape))  # fp32 -> bf16: round to nearest even, as the kernel's cast
        return out
    if y.dtype != act:
        y = y.to(act)
    return y if x.dim() == 2 else y.view(*x.shape[:-1], n)
