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
def _rebuild_pair(p, csh, bbc, negd):
    """One pair word from its mantissa bytes `p` (halves 0..255), codes `csh` (c << 3 per half),
    `bbc` = (B + 1) * 128 per half and `negd` = E - B + 15 (mod 2**32)."""
    t = csh + 0x00080008           # (c + 1) * 8 per half; bit 7 set iff c == 15
    escape = t & 0x00800080        # 128 per escaped half
    sign = p & 0x00800080          # the sign bit, still at bit 7 of each half
    return bbc - t * 16 + escape * negd + sign * 255 + p


@triton.jit
def bf12_pair_words(m64, c32, base, esc):
    """Rebuild the bf16 pair words H_r (r = 0..3) of one unit.

    `m64` uint64 and `c32` uint32 tensors of the same shape (one unit each), `base`/`esc` the
    group's exponents (any int dtype, broadcastable). H_r holds weights (32r + 2t, 32r + 2t + 1)
    of the group in its low/high halves, exactly the uint32 word of the raw bf16 matrix."""
    lo = m64.to(tl.uint32)
    hi = (m64 >> 32).to(tl.uint32)
    b = base.to(tl.uint32)
    bbc = (b + 1) * 0x00800080
    negd = esc.to(tl.uint32) - b + 15
    h0 = _rebuild_pair(lo & 0x00FF00FF, (c32 << 3) & 0x00780078, bbc, negd)
    h1 = _rebuild_pair((lo >> 8) & 0x00FF00FF, (c32 >> 1) & 0x00780078, bbc, negd)
    h2 = _rebuild_pair(hi & 0x00FF00FF, (c32 >> 5) & 0x00780078, bbc, negd)
    h3 = _rebuild_pair((hi >> 8) & 0x00FF00FF, (c32 >> 9) & 0x00780078, bbc, negd)
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
