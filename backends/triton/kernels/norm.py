"""RMSNorm and the fused residual-add + RMSNorm (HF Llama numerics, see KERNEL_CONTRACTS.md).

One program per row; the whole row (hidden <= 65536) is held in registers, read once and written
once; the fp32 sum of squares in the layout's reduction order. With `fixed_order` the sum is
_rms.py's order instead, which the linear kernels' norm prologue shares (a model with the
norm_linear fusion runs every norm so, and gets the prologue's bits): a first read of the row
for the sum (from DRAM), then the usual one (from L1); about 1.3 us more a launch on an H100
(session 22: 3.4 against 2.1 us at hidden 4096). The normalised row is rounded to the activation
dtype before the multiply by `w` (HF order); output dtype = x.dtype.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._numerics import round_to
from ._rms import chunks, rms_normed, row_sum_squares, rstd_of
from .launch_overlap import launch_dependents

MAX_HIDDEN = 65536


@triton.jit
def _rms_norm_kernel(
    x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr,
    stride_x, stride_res, stride_out, stride_res_out,
    N, eps,
    HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr, NCH: tl.constexpr, FIXED_ORDER: tl.constexpr,
):
    launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    act_dtype = out_ptr.dtype.element_ty
    rstd = 0.0
    if FIXED_ORDER:
        # the sum of squares first, in _rms.py's fixed order (its own reads of the row), then a barrier:
        # with residual_out = residual (in place) every read of res precedes every write
        start = tl.zeros((1, 1), tl.int64)
        sum_sq = row_sum_squares(x_ptr, res_ptr, start + row * stride_x, start + row * stride_res, N, 1, NCH,
                                 False, HAS_RESIDUAL, act_dtype)
        rstd = rstd_of(tl.sum(sum_sq, axis=0), N, eps)
        tl.debug_barrier()
    cols = tl.arange(0, BLOCK)
    in_row = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=in_row, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(res_ptr + row * stride_res + cols, mask=in_row, other=0.0).to(tl.float32)
        summed = round_to(x + r, act_dtype)
        tl.store(res_out_ptr + row * stride_res_out + cols, summed, mask=in_row)
        x = summed.to(tl.float32)
    if not FIXED_ORDER:  # the row in registers, summed in the layout's order (one read)
        rstd = rstd_of(tl.sum(x * x, axis=0), N, eps)
    w = tl.load(w_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, rms_normed(x, rstd, w, act_dtype), mask=in_row)


def _rows(t: torch.Tensor, n: int, writable: bool) -> torch.Tensor:
    """[..., n] -> [rows, n] with a unit last stride; outputs must be views (no copy)."""
    if t.dim() == 2 and t.stride(-1) == 1:
        return t
    if writable:
        if t.stride(-1) != 1:
            raise ValueError("output's last dimension must be contiguous")
        return t.view(-1, n)
    return t.reshape(-1, n).contiguous() if t.stride(-1) != 1 else t.reshape(-1, n)


def _launch(x, residual, w, eps, out, residual_out, fixed_order):
    n = x.shape[-1]
    if n > MAX_HIDDEN:
        raise ValueError(f"hidden size {n} > {MAX_HIDDEN} is not supported")
    if w.shape != (n,):
        raise ValueError(f"weight shape {tuple(w.shape)} != ({n},)")
    x2, out2 = _rows(x, n, False), _rows(out, n, True)
    rows = x2.shape[0]
    block = triton.next_power_of_2(n)
    num_warps = min(max(block // 512, 1), 16)
    if residual is None:
        r2 = ro2 = x2
    else:
        r2, ro2 = _rows(residual, n, False), _rows(residual_out, n, True)
    if rows == 0:
        return
    _rms_norm_kernel[(rows,)](
        x2, r2, w, out2, ro2,
        x2.stride(0), r2.stride(0), out2.stride(0), ro2.stride(0),
        n, eps,
        HAS_RESIDUAL=residual is not None, BLOCK=block, NCH=chunks(n), FIXED_ORDER=fixed_order,
        num_warps=num_warps,
    )


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, out: torch.Tensor | None = None,
             fixed_order: bool = False) -> torch.Tensor:
    """y = w * (x * rsqrt(mean(x^2) + eps)).to(x.dtype) over the last dim; x [..., N], w [N].
    `fixed_order`: the sum of squares in _rms.py's order, the bits of a linear's RMSNorm prologue."""
    out = torch.empty_like(x) if out is None else out
    _launch(x, None, w, eps, out, None, fixed_order)
    return out


def add_rms_norm(x, residual, w, eps, out=None, residual_out=None, fixed_order: bool = False):
    """(rms_norm(x + residual), x + residual), the sum rounded to x.dtype first (HF order).

    `residual_out=residual` updates the residual in place (each row is read before written)."""
    out = torch.empty_like(x) if out is None else out
    residual_out = torch.empty_like(x) if residual_out is None else residual_out
    _launch(x, residual, w, eps, out, residual_out, fixed_order)
    return out, residual_out
