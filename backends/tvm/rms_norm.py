"""RMSNorm with HF Llama numerics, optionally fused with the residual add before it.

    y = w * (x * rsqrt(mean(x^2) + eps)).to(act_dtype)

x is widened to fp32, the mean of squares is accumulated in fp32, the normalised row is rounded
to the activation dtype and then multiplied by `w` in fp32 and rounded again (HF's
`weight * hidden_states.to(input_dtype)`). With `residual`, the row normalised is
`h = (x + residual).to(act_dtype)`, which is also returned (the next residual).

One task per row (parallel when the call is big enough, see `host_target.parallel_rows`); the
sum of squares runs on `lanes` fp32 accumulators (a vector) and is reduced once. Rows are
symbolic; a kernel is compiled per (hidden, dtypes, fused?, parallel?).
"""

from __future__ import annotations

import torch

from .alignment import aligned
from .host_target import parallel_rows

_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}


def _lanes(hidden: int, fp32_lanes: int) -> int:
    return next(v for v in (fp32_lanes, 8, 4, 2, 1) if hidden % v == 0)


def build_rms_norm(hidden: int, act: str, w_dtype: str, fused_residual: bool, lanes: int, parallel: bool):
    """PrimFunc `(x[n, H], [residual[n, H]], w[H], y[n, H], [h_out[n, H]], eps)`."""
    from tvm.script import tirx as T

    from .numerics import round_to

    rows_loop = T.parallel if parallel else T.serial

    blocks = hidden // lanes
    inv_hidden = 1.0 / hidden

    def f32(e):
        return T.Cast("float32", e)

    if not fused_residual:

        @T.prim_func
        def rms_norm(var_x: T.handle, var_w: T.handle, var_y: T.handle, eps: T.float32):
            T.func_attr({"tirx.noalias": True})
            n = T.int64()
            x = T.match_buffer(var_x, (n, hidden), act)
            w = T.match_buffer(var_w, (hidden,), w_dtype)
            y = T.match_buffer(var_y, (n, hidden), act)
            for row in rows_loop(n):
                acc = T.alloc_buffer((lanes,), "float32", scope="local")
                scale = T.alloc_buffer((1,), "float32", scope="local")
                for lane in T.vectorized(lanes):
                    acc[lane] = T.float32(0)
                for blk in range(blocks):
                    for lane in T.vectorized(lanes):
                        acc[lane] = acc[lane] + f32(x[row, blk * lanes + lane]) * f32(x[row, blk * lanes + lane])
                scale[0] = T.float32(0)
                for lane in range(lanes):
                    scale[0] = scale[0] + acc[lane]
                scale[0] = T.float32(1) / T.sqrt(scale[0] * T.float32(inv_hidden) + eps)
                for blk in range(blocks):
                    for lane in T.vectorized(lanes):
                        y[row, blk * lanes + lane] = T.Cast(act, f32(w[blk * lanes + lane]) * round_to(
                            act, f32(x[row, blk * lanes + lane]) * scale[0]))

        return rms_norm

    @T.prim_func
    def add_rms_norm(var_x: T.handle, var_res: T.handle, var_w: T.handle, var_y: T.handle,
                     var_h: T.handle, eps: T.float32):
        T.func_attr({"tirx.noalias": True})
        n = T.int64()
        x = T.match_buffer(var_x, (n, hidden), act)
        res = T.match_buffer(var_res, (n, hidden), act)
        w = T.match_buffer(var_w, (hidden,), w_dtype)
        y = T.match_buffer(var_y, (n, hidden), act)
        h = T.match_buffer(var_h, (n, hidden), act)
        for row in rows_loop(n):
            acc = T.alloc_buffer((lanes,), "float32", scope="local")
            scale = T.alloc_buffer((1,), "float32", scope="local")
            for lane in T.vectorized(lanes):
                acc[lane] = T.float32(0)
            for blk in range(blocks):
                for lane in T.vectorized(lanes):
                    h[row, blk * lanes + lane] = T.Cast(act, f32(x[row, blk * lanes + lane]) + f32(res[row, blk * lanes + lane]))
                    acc[lane] = acc[lane] + f32(h[row, blk * lanes + lane]) * f32(h[row, blk * lanes + lane])
            scale[0] = T.float32(0)
            for lane in range(lanes):
                scale[0] = scale[0] + acc[lane]
            scale[0] = T.float32(1) / T.sqrt(scale[0] * T.float32(inv_hidden) + eps)
            for blk in range(blocks):
                for lane in T.vectorized(lanes):
                    y[row, blk * lanes + lane] = T.Cast(act, f32(w[blk * lanes + lane]) * round_to(
                        act, f32(h[row, blk * lanes + lane]) * scale[0]))

    return add_rms_norm


def rms_norm(cache, x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None,
             *, out: torch.Tensor | None = None):
    """RMSNorm over the last dim of x [..., H]. Returns y, or (y, x + residual) with `residual`."""
    hidden = x.shape[-1]
    if weight.shape != (hidden,):
        raise ValueError(f"rms_norm: weight shape {tuple(weight.shape)} != ({hidden},)")
    act, w_dtype = _DTYPES[x.dtype], _DTYPES[weight.dtype]
    lanes = _lanes(hidden, cache.host.fp32_lanes)
    fused = residual is not None
    x2 = _rows(x, hidden)
    parallel = parallel_rows(x2.shape[0], hidden)
    params = {"hidden": hidden, "act": act, "w": w_dtype, "fused_residual": fused, "lanes": lanes,
              "parallel": parallel}
    fn = cache.get("rms_norm", params, lambda: build_rms_norm(hidden, act, w_dtype, fused, lanes, parallel))
    y = out if out is not None else torch.empty(x.shape, dtype=x.dtype)
    w = aligned(weight if weight.is_contiguous() else weight.contiguous())
    if not fused:
        fn(x2, w, _rows(y, hidden), float(eps))
        return y
    h = torch.empty(x.shape, dtype=x.dtype)
    fn(x2, _rows(residual, hidden), w, _rows(y, hidden), _rows(h, hidden), float(eps))
    return y, h


def _rows(t: torch.Tensor, width: int) -> torch.Tensor:
    """t [..., width] as a contiguous, 64-byte aligned [rows, width] (no torch op when it already is one)."""
    if t.dim() != 2:
        t = t.reshape(-1, width)
    return aligned(t if t.is_contiguous() else t.contiguous())
