"""Numeric helpers shared by the kernels: rounding to the activation dtype, dot precision, SwiGLU.

Triton's CPU interpreter converts fp32 -> bf16 by truncation (the GPU rounds to nearest even)
and computes bf16 `tl.dot` wrongly. Kernels therefore round with `round_to` (bit-exact RNE in
the interpreter, the native conversion on a GPU) and call `dot_f32acc` for matrix products.
`INTERPRET` is a compile-time constant, so the GPU code carries none of this.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice

from ._interpreter_compat import interpreting

INTERPRET = tl.constexpr(interpreting())


@triton.jit
def round_to(x, dtype: tl.constexpr):
    """Round fp32 `x` to `dtype`, round-to-nearest-even on every platform."""
    if INTERPRET and dtype == tl.bfloat16:
        # the interpreter's own conversion truncates; integer ops only (its float conversion is slow), adds that
        # may wrap for large NaN payloads (NaN is replaced after: 0x7FC0, as torch).
        bits = x.to(tl.uint32, bitcast=True)
        rne = tl.add(bits, tl.add((bits >> 16) & 1, 0x7FFF, sanitize_overflow=False), sanitize_overflow=False) >> 16
        return tl.where(x != x, 0x7FC0, rne).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(dtype)


@triton.jit
def round_product(x, dtype: tl.constexpr):
    """`round_to` of an fp32 product that must stay rounded when a sum follows (HF rounds each product,
    then the sum). With plain conversions LLVM reads round(a * b) +- round(c * d) of bf16 operands as a
    bf16 multiply and contracts it with the sum into one `fma.rn.bf16`: one rounding where HF has two
    (sm_90 PTX of the rope kernel, 2026-12-06). On a GPU the conversion is inline PTX, which the
    compiler cannot fuse with anything."""
    if INTERPRET or dtype == tl.float32:
        return round_to(x, dtype)
    elif dtype == tl.bfloat16:
        return tl.inline_asm_elementwise("cvt.rn.bf16.f32 $0, $1;", "=h,r", [x], dtype=tl.bfloat16, is_pure=True,
                                         pack=1)
    else:
        return tl.inline_asm_elementwise("cvt.rn.f16.f32 $0, $1;", "=h,r", [x], dtype=tl.float16, is_pure=True,
                                         pack=1)


@triton.jit
def swiglu(gate, up, dtype: tl.constexpr):
    """HF's SwiGLU of fp32 `gate`, `up` (values of the activation dtype `dtype`): silu(gate) in
    fp32 rounded to `dtype`, times `up` in fp32, rounded to `dtype` (a `dtype` tensor). The one
    source of these bits: activation.silu_mul and the linear kernels' SwiGLU prologue call it."""
    act = round_to(gate / (1.0 + tl.exp(-gate)), dtype).to(tl.float32)
    return round_to(act * up, dtype)


@triton.jit
def dot_f32acc(a, b):
    """a @ b accumulated in fp32. bf16/fp16 operands use tensor cores; fp32 operands use full
    fp32 precision (no TF32), so an fp32 pipeline matches its torch reference to ~1e-6."""
    if INTERPRET or a.dtype == tl.float32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee", out_dtype=tl.float32)
    else:
        return tl.dot(a, b, out_dtype=tl.float32)


@triton.jit
def precise_cos(x):
    """fp32 cosine accurate for large arguments (libdevice on a GPU; rope angles reach 1e5 rad)."""
    if INTERPRET:
        return tl.cos(x)
    else:
        return libdevice.cos(x)


@triton.jit
def precise_sin(x):
    """fp32 sine accurate for large arguments (libdevice on a GPU)."""
    if INTERPRET:
        return tl.sin(x)
    else:
        return libdevice.sin(x)


@triton.jit
def softplus(x):
    """log(1 + e^x) in fp32, x itself past 20 (where the two agree in fp32)."""
    return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
