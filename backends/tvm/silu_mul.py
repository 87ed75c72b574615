"""SwiGLU activation `silu(gate) * up`, HF order: silu in fp32 rounded to the activation dtype,
then the product in fp32, rounded (`act_fn(gate_proj(x)) * up_proj(x)` bit for bit).

Takes separate gate and up [..., I], or one [..., 2I] tensor holding [gate | up] (the output of a
fused gate/up projection; passed to the kernel as a free `[n, 2, I]` view). exp is the
vectorised polynomial of `numerics.py`. One task per row (parallel when the call is big
enough); rows are symbolic.
"""

from __future__ import annotations

import torch

from .alignment import aligned
from .host_target import parallel_rows

_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}


def build_silu_mul(width: int, act: str, fused: bool, lanes: int, parallel: bool):
    """PrimFunc `(gate[n, I], up[n, I], out[n, I])`, or `(gate_up[n, 2, I], out[n, I])`."""
    from tvm.script import tirx as T

    from .numerics import round_to, sigmoid_f32

    rows_loop = T.parallel if parallel else T.serial

    blocks = width // lanes

    def f32(e):
        return T.Cast("float32", e)

    def swiglu(g, u):
        return T.Cast(act, round_to(act, g * sigmoid_f32(g)) * u)

    if fused:

        @T.prim_func
        def silu_mul_fused(var_gu: T.handle, var_out: T.handle):
            T.func_attr({"tirx.noalias": True})
            n = T.int64()
            gu = T.match_buffer(var_gu, (n, 2, width), act)
            out = T.match_buffer(var_out, (n, width), act)
            for row in rows_loop(n):
                for blk in range(blocks):
                    for lane in T.vectorized(lanes):
                        out[row, blk * lanes + lane] = swiglu(
                            f32(gu[row, 0, blk * lanes + lane]), f32(gu[row, 1, blk * lanes + lane]))

        return silu_mul_fused

    @T.prim_func
    def silu_mul(var_gate: T.handle, var_up: T.handle, var_out: T.handle):
        T.func_attr({"tirx.noalias": True})
        n = T.int64()
        gate = T.match_buffer(var_gate, (n, width), act)
        up = T.match_buffer(var_up, (n, width), act)
        out = T.match_buffer(var_out, (n, width), act)
        for row in rows_loop(n):
            for blk in range(blocks):
                for lane in T.vectorized(lanes):
                    out[row, blk * lanes + lane] = swiglu(
                        f32(gate[row, blk * lanes + lane]), f32(up[row, blk * lanes + lane]))

    return silu_mul


def silu_mul(cache, gate: torch.Tensor, up: torch.Tensor | None = None, *, out: torch.Tensor | None = None):
    """silu(gate) * up. With one argument its last dim is [gate | up]. Output [..., I]."""
    fused = up is None
    width = gate.shape[-1] // 2 if fused else gate.shape[-1]
    if not fused and up.shape != gate.shape:
        raise ValueError(f"silu_mul: gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    act = _DTYPES[gate.dtype]
    lanes = next(v for v in (cache.host.fp32_lanes, 8, 4, 2, 1) if width % v == 0)
    lead = gate.shape[:-1]
    parallel = parallel_rows(gate.numel() // gate.shape[-1], width)
    params = {"width": width, "act": act, "fused": fused, "lanes": lanes, "parallel": parallel}
    fn = cache.get("silu_mul", params, lambda: build_silu_mul(width, act, fused, lanes, parallel))
    y = out if out is not None else torch.empty(*lead, width, dtype=gate.dtype)
    if fused:
        fn(aligned(gate.reshape(-1, 2, width).contiguous()), _rows(y, width))
    else:
        fn(_rows(gate, width), _rows(up, width), _rows(y, width))
    return y


def _rows(t: torch.Tensor, width: int) -> torch.Tensor:
    """t [..., width] as a contiguous, 64-byte aligned [rows, width] (no torch op when it already is one)."""
    if t.dim() != 2:
        t = t.reshape(-1, width)
    return aligned(t if t.is_contiguous() else t.contiguous())
