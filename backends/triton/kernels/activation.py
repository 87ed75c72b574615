"""SwiGLU: silu(gate) * up, HF order (silu in fp32, rounded to the activation dtype, then the
product in fp32, rounded), i.e. `act_fn(gate_proj(x)) * up_proj(x)` bit for bit (`_numerics.swiglu`,
which the linear kernels' SwiGLU prologue shares: linear.py).

Takes either one [..., 2I] tensor holding [gate | up] (a fused gate/up projection) or separate
gate and up [..., I]. Grid: rows x column blocks.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._numerics import swiglu
from .launch_overlap import launch_dependents

BLOCK = 1024


@triton.jit
def _silu_mul_kernel(gate_ptr, up_ptr, out_ptr, stride_gate, stride_up, stride_out, width,
                     BLOCK: tl.constexpr):
    launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < width
    act_dtype = out_ptr.dtype.element_ty
    gate = tl.load(gate_ptr + row * stride_gate + cols, mask=ok, other=0.0).to(tl.float32)
    up = tl.load(up_ptr + row * stride_up + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, swiglu(gate, up, act_dtype), mask=ok)


def _rows(t: torch.Tensor) -> torch.Tensor:
    if t.stride(-1) != 1:
        raise ValueError("last dimension must be contiguous")
    return t if t.dim() == 2 else t.view(-1, t.shape[-1])


def silu_mul(gate_or_gate_up: torch.Tensor, up: torch.Tensor | None = None, out: torch.Tensor | None = None):
    """silu(gate) * up. One argument: its last dim is [gate | up]; output [..., I]."""
    if up is None:
        width = gate_or_gate_up.shape[-1] // 2
        both = _rows(gate_or_gate_up)
        gate2, up2 = both[:, :width], both[:, width:]
    else:
        width = gate_or_gate_up.shape[-1]
        gate2, up2 = _rows(gate_or_gate_up), _rows(up)
    if out is None:
        out = torch.empty(*gate_or_gate_up.shape[:-1], width, dtype=gate_or_gate_up.dtype,
                          device=gate_or_gate_up.device)
    out2 = _rows(out)
    rows = gate2.shape[0]
    if rows and width:
        block = min(BLOCK, triton.next_power_of_2(width))
        _silu_mul_kernel[(rows, triton.cdiv(width, block))](
            gate2, up2, out2, gate2.stride(0), up2.stride(0), out2.stride(0), width,
            BLOCK=block, num_warps=4)
    return out
