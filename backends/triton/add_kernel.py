"""Elementwise residual add `a + b` (rounded once to the output dtype) for an `add` op that no
rms_norm follows (the usual residual add is fused into add_rms_norm). Inputs may be strided
views with a contiguous last dim; grid: rows x column blocks."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .kernels._numerics import round_to
from .kernels.launch_overlap import launch_dependents

BLOCK = 1024


@triton.jit
def _add_kernel(a_ptr, b_ptr, out_ptr, stride_a, stride_b, stride_out, width, BLOCK: tl.constexpr):
    launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < width
    a = tl.load(a_ptr + row * stride_a + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride_b + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, round_to(a + b, out_ptr.dtype.element_ty), mask=ok)


def add(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """a + b over [..., W] tensors of one dtype; out (contiguous rows) may be preallocated."""
    width = a.shape[-1]
    out = torch.empty(a.shape, dtype=a.dtype, device=a.device) if out is None else out
    a2, b2, o2 = (t.reshape(-1, width) for t in (a, b, out))
    if o2.data_ptr() != out.data_ptr():
        raise ValueError("out must be a view-compatible tensor")
    rows = a2.shape[0]
    if rows and width:
        block = min(BLOCK, triton.next_power_of_2(width))
        _add_kernel[(rows, triton.cdiv(width, block))](a2, b2, o2, a2.stride(0), b2.stride(0), o2.stride(0), width,
                                                       BLOCK=block, num_warps=4)
    return out
