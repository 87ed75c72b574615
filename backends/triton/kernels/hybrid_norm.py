"""The hybrid families' norms in one launch each: `rms_norm_1p` (Qwen3.5 / Qwen3-Next, times 1 + w)
and `rms_norm_gated` (Gated DeltaNet's and Mamba2's gated RMSNorm). Numerics as the torch
reference (backends/reference/hybrid.py), which ran them as some ten torch launches each:

- 1p: h = x in fp32, h * rsqrt(mean(h^2) + eps) * (1 + w) in fp32, cast once;
- gated: h = x in fp32 (times silu(gate) first when GATE_FIRST), normalised, cast to the
  activation dtype, times w (one rounding, as bf16 * bf16 in torch); without GATE_FIRST the
  result times silu(gate) in fp32, cast once.

Each `group` consecutive channels are normalised on their own (group = width: the whole row);
the weight is indexed by channel modulo its length (a per-group weight, or one repeated over the
row). One program per (row, group) on a GPU (ROWS rows a program in the interpreter); rows are
[B, T] of strided [B, T, width] views whose last stride is 1, so the inputs and outputs can be
column slices of a wider buffer.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._interpreter_compat import interpreting
from ._numerics import round_to

MAX_GROUP = 65536


@triton.jit
def _silu(x):
    return x / (1.0 + tl.exp(-x))


@triton.jit
def _hybrid_norm_kernel(
    x_ptr, gate_ptr, w_ptr, out_ptr, N, T, sxb, sxt, sgb, sgt, sob, sot, W, eps,
    GROUP: tl.constexpr, BLOCK: tl.constexpr, ROWS: tl.constexpr, GATED: tl.constexpr, GATE_FIRST: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]   # [ROWS, 1] of the N = B * T rows
    b, t = row // T, row % T
    cols = tl.program_id(1).to(tl.int64) * GROUP + tl.arange(0, BLOCK)[None, :]
    inside = (tl.arange(0, BLOCK)[None, :] < GROUP) & (row < N)
    act_dtype = out_ptr.dtype.element_ty
    h = tl.load(x_ptr + b * sxb + t * sxt + cols, mask=inside, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols % W, mask=inside, other=0.0).to(tl.float32)
    if GATED:
        silu = _silu(tl.load(gate_ptr + b * sgb + t * sgt + cols, mask=inside, other=0.0).to(tl.float32))
        if GATE_FIRST:
            h = h * silu
    h = h * tl.rsqrt(tl.sum(h * h, axis=1, keep_dims=True) / GROUP + eps)
    if GATED:
        y = round_to(w * round_to(h, act_dtype).to(tl.float32), act_dtype)
        if not GATE_FIRST:
            y = round_to(y.to(tl.float32) * silu, act_dtype)
    else:
        y = round_to(h * (1.0 + w), act_dtype)
    tl.store(out_ptr + b * sob + t * sot + cols, y, mask=inside)


def _rows_per_program(rows: int, block: int) -> int:
    """1 on a GPU (a program per row); in the interpreter, which runs programs one after another with a
    fixed cost each, enough rows for a tile of up to 16384 elements."""
    if not interpreting():
        return 1
    return max(1, min(triton.next_power_of_2(rows), 16384 // block))


def _launch(x, gate, weight, eps, group, out, gate_first):
    if x.dim() != 3 or x.stride(-1) != 1 or out.shape != x.shape or out.stride(-1) != 1:
        raise ValueError(f"hybrid norm wants [B, T, width] views with a unit last stride, got {tuple(x.shape)} "
                         f"-> {tuple(out.shape)}")
    B, T, width = x.shape
    group = group or width
    if width % group or group > MAX_GROUP or weight.dim() != 1 or width % weight.shape[0]:
        raise ValueError(f"width {width}, group {group}, weight {tuple(weight.shape)}: groups must tile the row "
                         f"and the weight repeat over it (group <= {MAX_GROUP})")
    if B * T == 0:
        return out
    g = x if gate is None else gate
    block = triton.next_power_of_2(group)
    rows = _rows_per_program(B * T, block)
    _hybrid_norm_kernel[(triton.cdiv(B * T, rows), width // group)](
        x, g, weight.contiguous(), out, B * T, T, x.stride(0), x.stride(1), g.stride(0), g.stride(1),
        out.stride(0), out.stride(1), weight.shape[0], float(eps),
        GROUP=group, BLOCK=block, ROWS=rows, GATED=gate is not None, GATE_FIRST=bool(gate_first),
        num_warps=min(max(block // 512, 1), 16))
    return out


def rms_norm_1p(x: torch.Tensor, weight: torch.Tensor, eps: float, group: int | None = None,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """x [B, T, width] -> rmsnorm(x) * (1 + w) per `group` channels (None: the row), in fp32, cast once."""
    return _launch(x, None, weight, eps, group, torch.empty_like(x) if out is None else out, False)


def rms_norm_gated(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float, group: int | None = None,
                   gate_first: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    """x, gate [B, T, width] -> the gated RMSNorm (see the module docstring)."""
    if gate.shape != x.shape or gate.stride(-1) != 1:
        raise ValueError(f"gate {tuple(gate.shape)} does not match x {tuple(x.shape)} (or its last stride is not 1)")
    return _launch(x, gate, weight, eps, group, torch.empty_like(x) if out is None else out, gate_first)
