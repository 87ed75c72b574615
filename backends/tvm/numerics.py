"""fp32 numeric helpers as TIR expressions: a vectorisable exp, and rounding to bf16.

exp

LLVM lowers `tirx.exp` on a CPU to one scalar `expf` call per lane (no vector math library is
linked), which makes softmax and SiLU run at ~5 ns per element. `exp_f32` is the Cephes
range reduction + degree-6 polynomial: plain mul/add/floor/shift, so a vectorised loop stays
vectorised. Accuracy: a few ulp against torch.exp for x in [-87.3, 88.37] (tested);
exp(x) = 0 below -87.3 (the true value is < 1.2e-38, about the smallest normal float), so
exp(-inf) = 0 as softmax needs, and +inf above 88.37 (true overflow is at 88.72).

Rounding
TVM's BF16ComputeLegalize computes bf16 arithmetic in fp32 and folds a cast fp32 -> bf16 -> fp32
away, so an intermediate rounding written as casts silently disappears. HF's bf16 order rounds
intermediates (e.g. the normalised row in RMSNorm), so `round_to(dtype, x)` rounds with integer
ops instead (round to nearest even, NaN kept), which no pass can fold.
"""

from __future__ import annotations

from tvm import tirx

_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375  # ln 2 split in two so n * ln2 is exact to ~1e-11
_LN2_LO = -2.12194440e-4
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_LOW = -87.3
_HIGH = 88.37


def _f32(value: float):
    return tirx.const(value, "float32")


def exp_f32(x):
    """exp(x) for an fp32 TIR expression; see the module docstring for accuracy."""
    clamped = tirx.Min(tirx.Max(x, _f32(_LOW)), _f32(_HIGH))
    n = tirx.floor(clamped * _f32(_LOG2E) + _f32(0.5))
    r = clamped - n * _f32(_LN2_HI) - n * _f32(_LN2_LO)
    poly = _f32(_POLY[0])
    for c in _POLY[1:]:
        poly = poly * r + _f32(c)
    e_r = poly * r * r + r + _f32(1.0)
    # 2^n for n in [-126, 127]: the exponent field is n + 127.
    n_int = tirx.Cast("int32", n)
    scale = tirx.reinterpret("float32", tirx.shift_left(n_int + 127, tirx.const(23, "int32")))
    value = e_r * scale
    return tirx.Select(x < _f32(_LOW), _f32(0.0), tirx.Select(x > _f32(_HIGH), _f32(float("inf")), value))


def sigmoid_f32(x):
    """1 / (1 + exp(-x)) with `exp_f32`."""
    return _f32(1.0) / (_f32(1.0) + exp_f32(-x))


def round_to(dtype: str, x):
    """fp32 expression `x` rounded to `dtype` (bfloat16 or float32), as an fp32 value."""
    if dtype == "float32":
        return x
    if dtype != "bfloat16":
        raise ValueError(f"round_to: unsupported dtype {dtype}")
    bits = tirx.reinterpret("uint32", x)
    one = tirx.const(1, "uint32")
    rounded = (bits + tirx.const(0x7FFF, "uint32") + ((bits >> tirx.const(16, "uint32")) & one)) & tirx.const(0xFFFF0000, "uint32")
    # NaN test on the bits: the simplifier folds `x != x` to false
    is_nan = (bits & tirx.const(0x7FFFFFFF, "uint32")) > tirx.const(0x7F800000, "uint32")
    return tirx.Select(is_nan, x, tirx.reinterpret("float32", rounded))
