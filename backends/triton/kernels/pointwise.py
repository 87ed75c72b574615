"""The hybrid families' pointwise ops in one launch each: `activation` (silu, sigmoid, relu, relu2,
gelu, gelu_tanh, tanh), `mul`, `scale`, and the column moves `slice` (a grouped column slice) and
`concat` (one copy into each input's columns of the output) (ops_hybrid.py; reference:
backends/reference/hybrid.py).

Numerics as torch computes them on the activation dtype: each op in fp32 and rounded once per
torch operation (relu2: relu, then the square rounded; scale: `* factor`, `/ divisor` and
`* segment vector`, each rounded, in that order, each only when present). Operands are
[B, T, width] views with a unit last stride (column slices of wider buffers are fine); one
program per (row, block of channels).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._numerics import round_to

FUNCTIONS = ("silu", "sigmoid", "relu", "relu2", "gelu", "gelu_tanh", "tanh")
BLOCK = 1024


@triton.jit
def _apply(x, FN: tl.constexpr, act_dtype: tl.constexpr):
    """FN (an index into FUNCTIONS) of fp32 `x`, rounded to act_dtype as torch rounds it."""
    if FN == 0:
        y = round_to(x / (1.0 + tl.exp(-x)), act_dtype)
    elif FN == 1:
        y = round_to(1.0 / (1.0 + tl.exp(-x)), act_dtype)
    elif FN == 2:
        y = round_to(tl.maximum(x, 0.0), act_dtype)
    elif FN == 3:
        r = round_to(tl.maximum(x, 0.0), act_dtype).to(tl.float32)
        y = round_to(r * r, act_dtype)
    elif FN == 4:
        y = round_to(0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476)), act_dtype)
    elif FN == 5:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        y = round_to(0.5 * x * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0)), act_dtype)
    else:
        y = round_to(2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0, act_dtype)
    return y


@triton.jit
def _pointwise_kernel(
    a_ptr, b_ptr, v_ptr, out_ptr, T, W, sab, sat, sbb, sbt, sob, sot, factor, divisor,
    OP: tl.constexpr, FN: tl.constexpr, HAS_FACTOR: tl.constexpr, HAS_DIVISOR: tl.constexpr,
    HAS_VECTOR: tl.constexpr, BLOCK: tl.constexpr, GROUP: tl.constexpr = 1, START: tl.constexpr = 0,
    SIZE: tl.constexpr = 1,
):
    """OP 0: activation FN of a; 1: a * b; 2: scale a (factor, divisor, per-channel vector v);
    3: copy (out column c <- a column c // SIZE * GROUP + START + c % SIZE, W the output's width)."""
    row = tl.program_id(0).to(tl.int64)
    b, t = row // T, row % T
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = cols < W
    act_dtype = out_ptr.dtype.element_ty
    if OP == 3:
        src = (cols // SIZE) * GROUP + START + cols % SIZE
        tl.store(out_ptr + b * sob + t * sot + cols, tl.load(a_ptr + b * sab + t * sat + src, mask=inside), mask=inside)
        return
    x = tl.load(a_ptr + b * sab + t * sat + cols, mask=inside, other=0.0).to(tl.float32)
    if OP == 0:
        y = _apply(x, FN, act_dtype)
    elif OP == 1:
        y = round_to(x * tl.load(b_ptr + b * sbb + t * sbt + cols, mask=inside, other=0.0).to(tl.float32), act_dtype)
    else:
        y = x.to(act_dtype)
        if HAS_FACTOR:
            y = round_to(y.to(tl.float32) * factor, act_dtype)
        if HAS_DIVISOR:
            y = round_to(y.to(tl.float32) / divisor, act_dtype)
        if HAS_VECTOR:
            y = round_to(y.to(tl.float32) * tl.load(v_ptr + cols, mask=inside, other=0.0).to(tl.float32), act_dtype)
    tl.store(out_ptr + b * sob + t * sot + cols, y, mask=inside)


def _launch(op, a, b=None, vector=None, out=None, fn=0, factor=1.0, divisor=1.0, columns=None):
    """columns (OP 3): (group, start, size) of the grouped slice of a that out receives."""
    for t in (a, b, out):
        if t is not None and (t.dim() != 3 or t.stride(-1) != 1 or (t.shape != a.shape and columns is None)
                              or t.shape[:2] != a.shape[:2]):
            raise ValueError(f"pointwise ops want [B, T, width] views of one shape with a unit last stride, got "
                             f"{tuple(t.shape)} (stride {t.stride()})")
    if out.dtype != a.dtype:
        raise ValueError(f"pointwise ops keep the dtype: {a.dtype} in, {out.dtype} out")
    B, T, W = out.shape
    if B * T == 0 or W == 0:
        return out
    other = a if b is None else b
    group, start, size = columns or (1, 0, 1)
    _pointwise_kernel[(B * T, triton.cdiv(W, BLOCK))](
        a, other, a if vector is None else vector, out, T, W, a.stride(0), a.stride(1), other.stride(0),
        other.stride(1), out.stride(0), out.stride(1), float(factor), float(divisor),
        OP=op, FN=fn, HAS_FACTOR=factor != 1.0, HAS_DIVISOR=divisor != 1.0, HAS_VECTOR=vector is not None,
        BLOCK=BLOCK, GROUP=group, START=start, SIZE=size, num_warps=4)
    return out


def activation(x: torch.Tensor, fn: str, out: torch.Tensor | None = None) -> torch.Tensor:
    """fn(x) in x's dtype (FUNCTIONS)."""
    if fn not in FUNCTIONS:
        raise ValueError(f"unknown activation {fn!r}; known: {', '.join(FUNCTIONS)}")
    return _launch(0, x, out=torch.empty_like(x) if out is None else out, fn=FUNCTIONS.index(fn))


def mul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """a * b in the operands' dtype."""
    if b.dtype != a.dtype:
        raise ValueError(f"mul wants one dtype, got {a.dtype} and {b.dtype}")
    return _launch(1, a, b, out=torch.empty_like(a) if out is None else out)


def scale(x: torch.Tensor, factor: float = 1.0, divisor: float = 1.0, vector: torch.Tensor | None = None,
          out: torch.Tensor | None = None) -> torch.Tensor:
    """x * factor / divisor * vector (per channel, x's dtype), each step rounded as torch rounds it."""
    if vector is not None and (vector.shape != (x.shape[-1],) or vector.dtype != x.dtype):
        raise ValueError(f"scale's vector must be [{x.shape[-1]}] {x.dtype}, got {tuple(vector.shape)} {vector.dtype}")
    return _launch(2, x, vector=None if vector is None else vector.contiguous(),
                   out=torch.empty_like(x) if out is None else out, factor=factor, divisor=divisor)


def slice_(x: torch.Tensor, start: int, size: int, group: int | None = None, out: torch.Tensor | None = None):
    """Columns start .. start + size of every `group` consecutive columns of x (None: the row)."""
    width = x.shape[-1]
    group = group or width
    if width % group or not 0 <= start < start + size <= group:
        raise ValueError(f"slice {start}..{start + size} of groups of {group} does not fit width {width}")
    shape = (*x.shape[:-1], width // group * size)
    return _launch(3, x, out=torch.empty(shape, dtype=x.dtype, device=x.device) if out is None else out,
                   columns=(group, start, size))


def concat(*xs: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """xs side by side along the last dim: one copy launch per input into its columns of out."""
    width = sum(x.shape[-1] for x in xs)
    out = torch.empty(*xs[0].shape[:-1], width, dtype=xs[0].dtype, device=xs[0].device) if out is None else out
    at = 0
    for x in xs:
        slice_(x, 0, x.shape[-1], out=out[..., at:at + x.shape[-1]])
        at += x.shape[-1]
    return out
