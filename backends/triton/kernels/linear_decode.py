"""In-register BF12 decode: one 64-bit mantissa word + one 32-bit code word -> four bf16 pairs.

The layout (specir/bf12/layout.py) puts the two mantissa bytes of a pair in the two 16-bit
halves after one mask, and the pair's two codes at bits 3..6 and 19..22 after one shift and a
mask, so every step below works on both weights of a pair at once (SWAR in 32-bit words). With
``m`` = sign + 7 mantissa bits, ``c`` the code, ``B``/``E`` the group's base/escape exponents,
each 16-bit half becomes ``m + (s << 15) + (e << 7)`` with ``e = B - c`` (c < 15) or ``E``
(c = 15); all terms are exact integers per half, so no carry ever crosses halves.
"""
import triton
import triton.language as tl


@triton.jit
def _exponent_field(q, base128, nd8):
    """128 * exponent per 16-bit half from codes `q` (bits 0..3 of each half): base128 - 128 c,
    plus 128 * (E - B + 15) where c == 15 (`nd8` = 8 * (E - B + 15) mod 2**32)."""
    escape = (q + 0x00010001) & 0x00100010   # 16 per half whose code is 15
    return base128 - q * 128 + escape * nd8


@triton.jit
def _sign_mantissa(lo, hi, r: tl.constexpr, USE_PRMT: tl.constexpr):
    """The pair's sign + mantissa bits: m + (s << 15) per half, or with USE_PRMT the bytes with
    their sign replicated over bits 8..15, for `_merge` to mask."""
    if USE_PRMT:
        # one byte permute with sign replication: [sign(b1) b1 | sign(b0) b0], then a mask
        asm: tl.constexpr = ("prmt.b32 $0, $1, $2, 0xA280;" if r == 0 else
                             ("prmt.b32 $0, $1, $2, 0xB391;" if r == 1 else
                              ("prmt.b32 $0, $1, $2, 0xE6C4;" if r == 2 else "prmt.b32 $0, $1, $2, 0xF7D5;")))
        return tl.inline_asm_elementwise(asm, "=r,r,r", [lo, hi], dtype=tl.uint32, is_pure=True, pack=1)
    else:
        word = lo if r < 2 else hi
        if r % 2 == 1:
            word = word >> 8
        p = word & 0x00FF00FF
        return p + (p & 0x00800080) * 255


@triton.jit
def _merge(sign_mantissa, exponent, USE_PRMT: tl.constexpr):
    if USE_PRMT:
        return (sign_mantissa & 0x807F807F) | exponent  # one 3-input logic op
    else:
        return sign_mantissa + exponent


@triton.jit
def bf12_pair_words(m64, c32, base, esc, USE_PRMT: tl.constexpr = False):
    """Rebuild the bf16 pair words H_r (r = 0..3) of one unit.

    `m64` uint64 and `c32` uint32 tensors of the same shape (one unit each), `base`/`esc` the
    group's exponents (any int dtype, broadcastable). H_r holds weights (32r + 2t, 32r + 2t + 1)
    of the group in its low/high halves, exactly the uint32 word of the raw bf16 matrix.
    USE_PRMT (GPU only) builds the sign/mantissa part with one `prmt` per pair."""
    lo = m64.to(tl.uint32)
    hi = (m64 >> 32).to(tl.uint32)
    b = base.to(tl.uint32)
    base128 = b * 0x00800080
    nd8 = (esc.to(tl.uint32) - b + 15) * 8
    h0 = _merge(_sign_mantissa(lo, hi, 0, USE_PRMT),
                _exponent_field(c32 & 0x000F000F, base128, nd8), USE_PRMT)
    h1 = _merge(_sign_mantissa(lo, hi, 1, USE_PRMT),
                _exponent_field((c32 >> 4) & 0x000F000F, base128, nd8), USE_PRMT)
    h2 = _merge(_sign_mantissa(lo, hi, 2, USE_PRMT),
                _exponent_field((c32 >> 8) & 0x000F000F, base128, nd8), USE_PRMT)
    h3 = _merge(_sign_mantissa(lo, hi, 3, USE_PRMT),
                _exponent_field((c32 >> 12) & 0x000F000F, base128, nd8), USE_PRMT)
    return h0, h1, h2, h3


@triton.jit
def pair_to_f32(h):
    """(low, high) bf16 halves of uint32 pair words as exact fp32 values."""
    low = (h << 16).to(tl.float32, bitcast=True)
    high = (h & 0xFFFF0000).to(tl.float32, bitcast=True)
    return low, high


@triton.jit
def pair_to_bf16(h):
    """(low, high) bf16 halves of uint32 pair words as bf16 tensors (bit casts only)."""
    low = (h & 0xFFFF).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    high = (h >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return low, high
