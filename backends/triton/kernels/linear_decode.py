"""In-register BF12 decode (format version 2): one 64-bit `mant` word + one 32-bit code word ->
four bf16 pair words, with byte permutes (`prmt`) doing nearly all the work.

Per unit (8 weights; layout in specir/bf12/layout.py): the `mant` word holds the 8 bf16 low bytes,
the code word ``X`` the 8 signs and 3-bit codes. The group's table of high exponents
``T = [base, base-1, .., base-6, esc]`` lives in two registers (``T0``, ``T1``: 8 bytes, all < 128,
``base >= 6`` so building them never borrows across bytes). Then:

    Xm  = X & 0x77777777                                   # the codes as prmt selector nibbles
    HB1 = prmt(T0, T1, Xm)       | (X        & 0x80808080)  # high bytes of the 4 weights r < 2
    HB2 = prmt(T0, T1, Xm >> 16) | ((X << 4) & 0x80808080)  # high bytes of the 4 weights r >= 2
    H_r = prmt(lo or hi, HB1 or HB2, 0x5140 or 0x7362)      # interleave low/high bytes: bf16 pairs

7 operations for the 4 high bytes of 8 weights, escapes included, and one per pair word: about
1.4 integer operations per weight before the fp32 split that the bf16 kernel does too.
On the GPU `prmt` is one PTX instruction (inline asm); the interpreter (and `USE_PRMT=False`)
runs an exact emulation of its default mode, so the CPU tests check the same selectors and tables.
"""
import triton
import triton.language as tl


@triton.jit
def _prmt_emulated(a, b, sel):
    """PTX `prmt.b32 d, a, b, sel` (default mode) on uint32 tensors: output byte i is byte
    ``n & 7`` of the 8-byte value {b, a} (a = bytes 0..3) for selector nibble ``n = sel >> 4i``,
    or, when ``n & 8``, that byte's top bit replicated over the byte."""
    out = tl.zeros_like(a | b | sel)
    for i in tl.static_range(4):
        n = (sel >> (4 * i)) & 0xF
        idx = n & 7
        src = tl.where(idx < 4, a, b)
        v = (src >> ((idx & 3) * 8)) & 0xFF
        v = tl.where((n & 8) != 0, tl.where((v & 0x80) != 0, 0xFF, 0).to(tl.uint32), v)
        out = out | (v << (8 * i))
    return out


@triton.jit
def prmt(a, b, sel, USE_PRMT: tl.constexpr):
    """Byte permute with a per-element selector (uint32 tensors, broadcast)."""
    if USE_PRMT:
        return tl.inline_asm_elementwise("prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, sel],
                                         dtype=tl.uint32, is_pure=True, pack=1)
    else:
        return _prmt_emulated(a, b, sel)


@triton.jit
def _pair(low_bytes, high_bytes, odd: tl.constexpr, USE_PRMT: tl.constexpr):
    """bf16 pair word of pair slot 2q + odd from 4 low bytes and the matching 4 high bytes."""
    if USE_PRMT:
        asm: tl.constexpr = "prmt.b32 $0, $1, $2, 0x7362;" if odd else "prmt.b32 $0, $1, $2, 0x5140;"
        return tl.inline_asm_elementwise(asm, "=r,r,r", [low_bytes, high_bytes], dtype=tl.uint32,
                                         is_pure=True, pack=1)
    else:
        sel: tl.constexpr = 0x7362 if odd else 0x5140
        return _prmt_emulated(low_bytes, high_bytes, tl.zeros_like(low_bytes) + sel)


@triton.jit
def exponent_tables(base, esc):
    """The group's 8-entry table of high exponents as two uint32 words (bytes 0..3, 4..7):
    T[c] = base - c for c in 0..6, T[7] = esc."""
    b = base.to(tl.uint32)
    t0 = b * 0x01010101 - 0x03020100
    t1 = b * 0x00010101 - 0x00060504 + (esc.to(tl.uint32) << 24)
    return t0, t1


@triton.jit
def bf12_pair_words(m64, c32, base, esc, USE_PRMT: tl.constexpr = False):
    """Rebuild the bf16 pair words H_r (r = 0..3) of one unit.

    `m64` uint64 and `c32` uint32 tensors of the same shape (one unit each), `base`/`esc` the
    group's table bytes (any int dtype, broadcastable). H_r holds weights (32r + 2t, 32r + 2t + 1)
    of the group in its low/high halves, exactly the uint32 word of the raw bf16 matrix."""
    t0, t1 = exponent_tables(base, esc)
    return bf12_pair_words_t(m64, c32, t0, t1, USE_PRMT)


@triton.jit
def bf12_pair_words_t(m64, c32, t0, t1, USE_PRMT: tl.constexpr = False):
    """`bf12_pair_words` with the group's tables already built (`exponent_tables`)."""
    lo = m64.to(tl.uint32)
    hi = (m64 >> 32).to(tl.uint32)
    xm = c32 & 0x77777777
    hb1 = prmt(t0, t1, xm, USE_PRMT) | (c32 & 0x80808080)
    hb2 = prmt(t0, t1, xm >> 16, USE_PRMT) | ((c32 << 4) & 0x80808080)
    h0 = _pair(lo, hb1, False, USE_PRMT)
    h1 = _pair(lo, hb1, True, USE_PRMT)
    h2 = _pair(hi, hb2, False, USE_PRMT)
    h3 = _pair(hi, hb2, True, USE_PRMT)
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
