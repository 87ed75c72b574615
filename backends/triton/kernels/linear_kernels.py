"""Triton linear kernels `y[M, N] = x[M, K] @ w[N, K]^T (+ bias)` for raw bf16 and BF12 weights.

One source, a constexpr `FORMAT` switch: the only format-dependent code is how a block's weights
become bf16 pair words (a load for bf16, `bf12_pair_words` for BF12); blocking, the order of
every fp32 operation and the split-K reduction are shared, so both formats give the same bits.

Blocking. An iteration covers `G` groups of 128 weights along K for `BN` rows. Its weights are
handled as four pair-word tensors `H_r[BN, G, 16]` (r = 0..3, unit t = 0..15), `H_r` holding
weights (g*128 + 32r + 2t, +1). Iterations are split into `SPLIT` contiguous K ranges (grid
axis 1, or the work item's K range in the persistent GEMV); full iterations run unmasked, the
ragged last one (K % (128 G) != 0) masked.

- GEMV (M = 1): fp32 accumulators `acc_lo/acc_hi[BN, G, 16]` take one fma per weight in
  iteration order, r = 0..3; at the end `acc_lo + acc_hi` is summed by a fixed pairwise tree.
- skinny GEMM (any M, BM rows per program): per iteration and r, one `tl.dot` of x's columns
  (g*128 + 32r + j, j = 0..31) with the matching [BN, 32 G] weight tile, fp32 accumulator.

Prologues (constexpr `PRO`: PRO_SWIGLU or PRO_RMS_NORM). SwiGLU: x is not read but computed,
x = swiglu(gate, up) from `x_ptr` (gate) and `up_ptr` (up, same shape; row stride `stride_um` in
the GEMM), with
`_numerics.swiglu` (silu in fp32 rounded to the activation dtype, the product in fp32 rounded),
right where the plain kernel loads x; every x value is then the value `activation.silu_mul` would
have stored, and the arithmetic after it is unchanged, so the result is the bits of silu_mul then
the plain kernel. Masked-out columns read gate = up = 0, so x = +0 as in the plain kernel. The
prefetching GEMV loop computes each iteration's x once on compact [G * 64] pair-word tensors and
then splits them into the pair slots (`_x_words`): x in the weights' [1, G, 16] shape is
replicated over the program's rows, so computing it there costs one SwiGLU per weight (sm_90 SASS,
bench/sass_count.py, 4096 x 14336: 12.1 instructions per weight that way, 4.0 this way, 2.8 plain).

RMSNorm prologue (`PRO_RMS_NORM`): x_ptr holds the norm's input h and up_ptr its weight (row
stride 0); each program first sums its rows' squares in _rms.py's fixed order (the whole row,
read in NORM_NCH chunks), then computes x = rms_normed(h, rstd, weight) where the plain kernel
loads x: exactly the values norm.rms_norm(..., fixed_order=True) would have stored, so the bits of
that norm then the plain kernel, and the [M, K] normalised activation is neither written nor read.

Residual epilogue (`RESIDUAL`): y = res + (x w^T + bias), each rounded as add_kernel would round the
sum of the stored product and the residual (`_finish`).

Split-K: each program stores its fp32 partial to a workspace, bumps a per-tile counter; the last
one to arrive sums the partials in split order (0, 1, ...), adds the bias, stores, and resets the
counter to 0 (so the counter buffer must start zeroed and kernels on one buffer must not overlap).
"""
import triton
import triton.language as tl

from ._numerics import INTERPRET, round_to, swiglu
from ._rms import rms_normed, row_sum_squares, rstd_of
from .launch_overlap import await_inputs, launch_dependents, prefetch_l2
from .rope_kv_epilogue import store_head
from .linear_decode import bf12_pair_words, pair_to_bf16, pair_to_f32

FORMAT_BF16 = tl.constexpr(0)
FORMAT_BF12 = tl.constexpr(1)


@triton.jit
def _pair_words(w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, it, K, stride_w, n_groups,
                FORMAT: tl.constexpr, WORDS: tl.constexpr, G: tl.constexpr, MASKED: tl.constexpr,
                PRMT: tl.constexpr):
    """The four pair-word tensors H_r [BN, G, 16] (uint32) of rows `nn` [BN, 1, 1] (int64) at
    iteration `it`. Masked-out weights read as +0 (bf16) or decode to +0 / a finite positive
    value (BF12 padding); the matching x is 0, so both contribute +0."""
    gg = tl.arange(0, G)[None, :, None]
    tt = tl.arange(0, 16)[None, None, :]
    g = it * G + gg
    if FORMAT == FORMAT_BF12:
        unit = g * 16 + tt
        row_units = nn * (n_groups * 16)
        if MASKED:
            in_k = g < n_groups
            m64 = tl.load(mant_ptr + row_units + unit, mask=in_k, other=0)
            c32 = tl.load(code_ptr + row_units + unit, mask=in_k, other=0)
            base = tl.load(base_ptr + nn * n_groups + g, mask=in_k, other=0)
            esc = tl.load(esc_ptr + nn * n_groups + g, mask=in_k, other=0)
        else:
            m64 = tl.load(mant_ptr + row_units + unit)
            c32 = tl.load(code_ptr + row_units + unit)
            base = tl.load(base_ptr + nn * n_groups + g)
            esc = tl.load(esc_ptr + nn * n_groups + g)
        h0, h1, h2, h3 = bf12_pair_words(m64.to(tl.uint64, bitcast=True), c32.to(tl.uint32, bitcast=True),
                                         base, esc, PRMT)
    else:
        if WORDS:  # w_ptr: int32 view, stride_w = K // 2 words
            wi = nn * stride_w + g * 64 + tt
            if MASKED:
                h0 = tl.load(w_ptr + wi, mask=g * 128 + 2 * tt < K, other=0)
                h1 = tl.load(w_ptr + wi + 16, mask=g * 128 + 32 + 2 * tt < K, other=0)
                h2 = tl.load(w_ptr + wi + 32, mask=g * 128 + 64 + 2 * tt < K, other=0)
                h3 = tl.load(w_ptr + wi + 48, mask=g * 128 + 96 + 2 * tt < K, other=0)
            else:
                h0 = tl.load(w_ptr + wi)
                h1 = tl.load(w_ptr + wi + 16)
                h2 = tl.load(w_ptr + wi + 32)
                h3 = tl.load(w_ptr + wi + 48)
            h0 = h0.to(tl.uint32, bitcast=True)
            h1 = h1.to(tl.uint32, bitcast=True)
            h2 = h2.to(tl.uint32, bitcast=True)
            h3 = h3.to(tl.uint32, bitcast=True)
        else:  # odd K: w_ptr is an int16 view, stride_w = K
            h0 = _element_pair(w_ptr, nn * stride_w, g * 128 + 2 * tt, K)
            h1 = _element_pair(w_ptr, nn * stride_w, g * 128 + 32 + 2 * tt, K)
            h2 = _element_pair(w_ptr, nn * stride_w, g * 128 + 64 + 2 * tt, K)
            h3 = _element_pair(w_ptr, nn * stride_w, g * 128 + 96 + 2 * tt, K)
    return h0, h1, h2, h3


WCACHE_L2_ONLY = tl.constexpr(1)      # ld.global.cg: weights bypass L1 (x, tables and the norm row keep it)
WCACHE_EVICT_FIRST = tl.constexpr(2)  # evict-first for weights (Triton sets it for L1 and as an L2 hint)


@triton.jit
def _weight_load(ptr, WCACHE: tl.constexpr):
    """A load of weight bytes (read once per launch) with the cache policy WCACHE; the bytes are the same."""
    if WCACHE == WCACHE_L2_ONLY:
        return tl.load(ptr, cache_modifier=".cg")
    elif WCACHE == WCACHE_EVICT_FIRST:
        return tl.load(ptr, eviction_policy="evict_first")
    else:
        return tl.load(ptr)


PRO_NONE = tl.constexpr(0)
PRO_SWIGLU = tl.constexpr(1)
PRO_RMS_NORM = tl.constexpr(2)


@triton.jit
def _prologue(x, u, rstd, ACT: tl.constexpr, PRO: tl.constexpr):
    """The kernel's input value from fp32 `x` and its second operand `u` (an ACT tensor): SwiGLU
    (x the gate, u the up value) or RMSNorm (x the un-normalised value, u the norm weight, `rstd`
    the row's)."""
    if PRO == PRO_SWIGLU:
        return swiglu(x, u, ACT)
    else:
        return rms_normed(x, rstd, u, ACT)


@triton.jit
def _x_loads(x_ptr, up_ptr, it, G: tl.constexpr, PRO: tl.constexpr):
    """x pair words of one full GEMV iteration, one tensor [1, G, 16] per pair slot r; with PRO
    the iteration's gate and up pair words as two compact [G * 64] tensors (`_x_words` combines them)."""
    gg = tl.arange(0, G)[None, :, None]
    tt = tl.arange(0, 16)[None, None, :]
    kw = (it * G + gg) * 64 + tt
    if PRO:
        flat = it * (G * 64) + tl.arange(0, G * 64)
        return tl.load(x_ptr + flat), tl.load(up_ptr + flat)
    else:
        return tl.load(x_ptr + kw), tl.load(x_ptr + kw + 16), tl.load(x_ptr + kw + 32), tl.load(x_ptr + kw + 48)


@triton.jit
def _x_words(xs, rstd, G: tl.constexpr, ACT: tl.constexpr, PRO: tl.constexpr):
    """The four x pair-word tensors [1, G, 16] of `_x_loads`' result. With PRO the words are
    swiglu(gate, up) (ACT = bf16 here: pair words), computed once per element on the compact
    [G * 64] tensors (a tensor of the weights' shape [1, G, 16] is replicated over the program's
    rows: computing there would repeat it for every row), then split into the pair slots."""
    if PRO:
        g_lo, g_hi = pair_to_f32(xs[0].to(tl.uint32, bitcast=True))
        u_lo, u_hi = pair_to_f32(xs[1].to(tl.uint32, bitcast=True))
        lo = _prologue(g_lo, u_lo, rstd, ACT, PRO).to(tl.uint16, bitcast=True).to(tl.uint32)
        hi = _prologue(g_hi, u_hi, rstd, ACT, PRO).to(tl.uint16, bitcast=True).to(tl.uint32)
        w = tl.reshape(tl.permute(tl.reshape(lo | (hi << 16), (G, 4, 16)), (0, 2, 1)), (G, 16, 2, 2))
        even, odd = tl.split(w)         # slots r = 0, 2 and r = 1, 3
        w0, w2 = tl.split(even)
        w1, w3 = tl.split(odd)
        return (tl.reshape(w0, (1, G, 16)), tl.reshape(w1, (1, G, 16)), tl.reshape(w2, (1, G, 16)),
                tl.reshape(w3, (1, G, 16)))
    else:
        return xs


@triton.jit
def _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, it, stride_w, n_groups,
                    FORMAT: tl.constexpr, G: tl.constexpr, X_LATE: tl.constexpr, PRO: tl.constexpr,
                    WCACHE: tl.constexpr):
    """Raw loads of one full GEMV iteration (BF12 planes or bf16 pair words, and x pair words),
    as a tuple that the prefetching loop carries ahead. With X_LATE the x words (the same for
    every row, L1 hits) are not carried: `xs` is the iteration index and x is loaded at compute
    time, which frees 16 registers per buffer for weight bytes in flight. WCACHE: the weights' cache
    policy (`_weight_load`)."""
    gg = tl.arange(0, G)[None, :, None]
    tt = tl.arange(0, 16)[None, None, :]
    g = it * G + gg
    kw = g * 64 + tt
    if X_LATE:
        xs = it
    else:
        xs = _x_loads(x_ptr, up_ptr, it, G, PRO)
    if FORMAT == FORMAT_BF12:
        unit = nn * (n_groups * 16) + g * 16 + tt
        ws = (_weight_load(mant_ptr + unit, WCACHE), _weight_load(code_ptr + unit, WCACHE),
              tl.load(base_ptr + nn * n_groups + g), tl.load(esc_ptr + nn * n_groups + g))
    else:
        wi = nn * stride_w + kw
        ws = (_weight_load(w_ptr + wi, WCACHE), _weight_load(w_ptr + wi + 16, WCACHE),
              _weight_load(w_ptr + wi + 32, WCACHE), _weight_load(w_ptr + wi + 48, WCACHE))
    return ws, xs


@triton.jit
def _gemv_from_loads(acc_lo, acc_hi, ws, xs, x_ptr, up_ptr, rstd, FORMAT: tl.constexpr, PRMT: tl.constexpr,
                     G: tl.constexpr, X_LATE: tl.constexpr, PRO: tl.constexpr, ACT: tl.constexpr):
    if X_LATE:
        xs = _x_loads(x_ptr, up_ptr, xs, G, PRO)
    if FORMAT == FORMAT_BF12:
        h0, h1, h2, h3 = bf12_pair_words(ws[0].to(tl.uint64, bitcast=True), ws[1].to(tl.uint32, bitcast=True),
                                         ws[2], ws[3], PRMT)
    else:
        h0 = ws[0].to(tl.uint32, bitcast=True)
        h1 = ws[1].to(tl.uint32, bitcast=True)
        h2 = ws[2].to(tl.uint32, bitcast=True)
        h3 = ws[3].to(tl.uint32, bitcast=True)
    xs = _x_words(xs, rstd, G, ACT, PRO)
    acc_lo, acc_hi = _fma_pair(acc_lo, acc_hi, h0, xs[0])
    acc_lo, acc_hi = _fma_pair(acc_lo, acc_hi, h1, xs[1])
    acc_lo, acc_hi = _fma_pair(acc_lo, acc_hi, h2, xs[2])
    acc_lo, acc_hi = _fma_pair(acc_lo, acc_hi, h3, xs[3])
    return acc_lo, acc_hi


@triton.jit
def _fma_pair(acc_lo, acc_hi, h, xw):
    w_lo, w_hi = pair_to_f32(h)
    x_lo, x_hi = pair_to_f32(xw.to(tl.uint32, bitcast=True))
    acc_lo = tl.fma(tl.broadcast_to(x_lo, acc_lo.shape), w_lo, acc_lo)
    acc_hi = tl.fma(tl.broadcast_to(x_hi, acc_hi.shape), w_hi, acc_hi)
    return acc_lo, acc_hi


@triton.jit
def _element_pair(w_ptr, row, k, K):
    """Pair word of bf16 elements (k, k+1) read one by one (masked by k < K)."""
    lo = tl.load(w_ptr + row + k, mask=k < K, other=0).to(tl.uint16, bitcast=True).to(tl.uint32)
    hi = tl.load(w_ptr + row + k + 1, mask=k + 1 < K, other=0).to(tl.uint16, bitcast=True).to(tl.uint32)
    return lo | (hi << 16)


@triton.jit
def _x_pair(x_ptr, up_ptr, rstd, k, kw, K, X_PAIRS: tl.constexpr, MASKED: tl.constexpr, PRO: tl.constexpr,
            ACT: tl.constexpr):
    """fp32 x at even columns k and odd columns k + 1 (0 beyond K when MASKED); with PRO
    x = swiglu(gate, up) of the values at x_ptr (gate) and up_ptr, rounded to ACT."""
    if PRO:
        g_lo, g_hi = _element_pair_f32(x_ptr, k, kw, K, X_PAIRS, MASKED)
        u_lo, u_hi = _element_pair_f32(up_ptr, k, kw, K, X_PAIRS, MASKED)
        return (_prologue(g_lo, u_lo, rstd, ACT, PRO).to(tl.float32),
                _prologue(g_hi, u_hi, rstd, ACT, PRO).to(tl.float32))
    else:
        return _element_pair_f32(x_ptr, k, kw, K, X_PAIRS, MASKED)


@triton.jit
def _element_pair_f32(x_ptr, k, kw, K, X_PAIRS: tl.constexpr, MASKED: tl.constexpr):
    """fp32 values of x_ptr at even columns k and odd columns k + 1 (0 beyond K when MASKED). With
    X_PAIRS (bf16 x, even K) x_ptr is an int32 view and word kw = k // 2 holds both."""
    if X_PAIRS:
        if MASKED:
            xw = tl.load(x_ptr + kw, mask=2 * kw < K, other=0)
        else:
            xw = tl.load(x_ptr + kw)
        return pair_to_f32(xw.to(tl.uint32, bitcast=True))
    else:
        if MASKED:
            xe = tl.load(x_ptr + k, mask=k < K, other=0.0)
            xo = tl.load(x_ptr + k + 1, mask=k + 1 < K, other=0.0)
        else:
            xe = tl.load(x_ptr + k)
            xo = tl.load(x_ptr + k + 1)
        return xe.to(tl.float32), xo.to(tl.float32)


@triton.jit
def _gemv_fma(acc_lo, acc_hi, h, x_ptr, up_ptr, rstd, k, kw, K, X_PAIRS: tl.constexpr, MASKED: tl.constexpr,
              PRO: tl.constexpr, ACT: tl.constexpr):
    w_lo, w_hi = pair_to_f32(h)
    x_lo, x_hi = _x_pair(x_ptr, up_ptr, rstd, k, kw, K, X_PAIRS, MASKED, PRO, ACT)
    acc_lo = tl.fma(tl.broadcast_to(x_lo, acc_lo.shape), w_lo, acc_lo)
    acc_hi = tl.fma(tl.broadcast_to(x_hi, acc_hi.shape), w_hi, acc_hi)
    return acc_lo, acc_hi


@triton.jit
def _gemv_iteration(acc_lo, acc_hi, x_ptr, up_ptr, rstd, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, it,
                    K, stride_w, n_groups,
                    FORMAT: tl.constexpr, WORDS: tl.constexpr, X_PAIRS: tl.constexpr, G: tl.constexpr,
                    MASKED: tl.constexpr, PRMT: tl.constexpr, PRO: tl.constexpr, ACT: tl.constexpr):
    h0, h1, h2, h3 = _pair_words(w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, it, K, stride_w,
                                 n_groups, FORMAT, WORDS, G, MASKED, PRMT)
    gg = tl.arange(0, G)[None, :, None]
    tt = tl.arange(0, 16)[None, None, :]
    kw = (it * G + gg) * 64 + tt      # [1, G, 16] x word (pair) index; pair slot r adds 16 r
    k = 2 * kw
    acc_lo, acc_hi = _gemv_fma(acc_lo, acc_hi, h0, x_ptr, up_ptr, rstd, k, kw, K, X_PAIRS, MASKED, PRO, ACT)
    acc_lo, acc_hi = _gemv_fma(acc_lo, acc_hi, h1, x_ptr, up_ptr, rstd, k + 32, kw + 16, K, X_PAIRS, MASKED, PRO, ACT)
    acc_lo, acc_hi = _gemv_fma(acc_lo, acc_hi, h2, x_ptr, up_ptr, rstd, k + 64, kw + 32, K, X_PAIRS, MASKED, PRO, ACT)
    acc_lo, acc_hi = _gemv_fma(acc_lo, acc_hi, h3, x_ptr, up_ptr, rstd, k + 96, kw + 48, K, X_PAIRS, MASKED, PRO, ACT)
    return acc_lo, acc_hi


@triton.jit
def _tree_sum_rows(v, BN: tl.constexpr, L: tl.constexpr):
    """Sum [BN, L] along L by a fixed pairwise tree (adjacent pairs, log2 L levels)."""
    for level in tl.static_range(16):
        if (L >> level) > 1:
            a, b = tl.split(tl.reshape(v, (BN, L >> (level + 1), 2)))
            v = a + b
    return tl.reshape(v, (BN,))


@triton.jit
def _split_reduce(part, ws_ptr, cnt_ptr, ok, m, n, M, R, tile, sid, SPLIT: tl.constexpr):
    """(the tile's full sum, whether this program holds it): with SPLIT > 1 every program stores
    its partial [BM, BN] of K range `sid` to the workspace [SPLIT, M, R] and bumps the tile's counter; the last to
    arrive sums the partials in split order (0, 1, ...) and resets the counter to 0."""
    done = True
    if SPLIT > 1:
        ws = ws_ptr + (m * R + n)
        tl.store(ws + sid * M * R, part, mask=ok)
        tl.debug_barrier()
        arrived = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
        done = arrived == SPLIT - 1
        if done:
            part = tl.load(ws, mask=ok, other=0.0, cache_modifier=".cg")
            for s in tl.static_range(1, SPLIT):
                part = part + tl.load(ws + s * M * R, mask=ok, other=0.0, cache_modifier=".cg")
            tl.atomic_xchg(cnt_ptr + tile, 0)
    return part, done


@triton.jit
def _finish(part, y_ptr, bias_ptr, rows_ptr, ws_ptr, cnt_ptr, res_ptr, m, n, M, R, stride_ym, stride_rm, tile, sid,
            SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_ROWS: tl.constexpr, RESIDUAL: tl.constexpr):
    """Combine split-K partials `part` [BM, BN] (fp32) deterministically, add bias, store.
    `m` [BM, 1] and `n` [1, BN] index the tile; `tile` numbers it for the counter, `sid` is the K range. RESIDUAL (the
    residual-add epilogue): y = res + (x w^T + bias), the product rounded to y's dtype first and the
    sum rounded again, as add_kernel adds the two stored values; `res` rows `stride_rm` apart."""
    ok = (m < M) & (n < R)
    part, done = _split_reduce(part, ws_ptr, cnt_ptr, ok, m, n, M, R, tile, sid, SPLIT)
    if done:
        if HAS_ROWS:
            out_n = tl.load(rows_ptr + n, mask=n < R, other=0)
        else:
            out_n = n
        if HAS_BIAS:
            part = part + tl.load(bias_ptr + out_n, mask=n < R, other=0.0).to(tl.float32)
        y = round_to(part, y_ptr.dtype.element_ty)
        if RESIDUAL:
            res = tl.load(res_ptr + m * stride_rm + out_n, mask=ok, other=0.0).to(tl.float32)
            y = round_to(y.to(tl.float32) + res, y_ptr.dtype.element_ty)
        tl.store(y_ptr + m * stride_ym + out_n, y, mask=ok)


@triton.jit
def _prefetch_weights(w_ptr, mant_ptr, code_ptr, nn, it, K, stride_w, n_groups,
                      FORMAT: tl.constexpr, WORDS: tl.constexpr, G: tl.constexpr):
    """L2 prefetch of iteration `it`'s weights of rows `nn` [BN, 1, 1]: per 128-weight group, the
    BF12 mantissa and code lines, or the bf16 row's two 128-byte lines (addresses clamped to K)."""
    g = it * G + tl.arange(0, G)[None, :, None]
    if FORMAT == FORMAT_BF12:
        unit = nn * (n_groups * 16) + tl.minimum(g, n_groups - 1) * 16
        prefetch_l2(mant_ptr + unit)
        prefetch_l2(code_ptr + unit)
    else:
        k = tl.minimum(g * 128 + 64 * tl.arange(0, 2)[None, None, :], K - 1)
        if WORDS:  # int32 pair words
            prefetch_l2(w_ptr + nn * stride_w + k // 2)
        else:
            prefetch_l2(w_ptr + nn * stride_w + k)


@triton.jit
def _gemv_rows(x_ptr, up_ptr, act_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, eps, blk, sid, R, K, stride_w,
               n_groups, n_iters, n_full, iters_per_split,
               FORMAT: tl.constexpr, WORDS: tl.constexpr, X_PAIRS: tl.constexpr, BN: tl.constexpr,
               G: tl.constexpr, PRMT: tl.constexpr, PREFETCH: tl.constexpr, X_LATE: tl.constexpr,
               DEPTH: tl.constexpr, PRO: tl.constexpr, NORM_NCH: tl.constexpr, PDL: tl.constexpr,
               PDL_ITERS: tl.constexpr, WCACHE: tl.constexpr):
    """One GEMV work item's fp32 partial [BN] (`_finish` stores it): rows blk*BN .. of the R rows of one
    format, K range `sid`; `act_ptr`'s element type is the activation dtype.
    PDL (launch_overlap.py): the program first prefetches the weights of its first PDL_ITERS
    iterations into L2, then waits for the earlier launches; nothing else is read before."""
    act_dtype = act_ptr.dtype.element_ty  # the activation dtype: x, up and y share it
    n = blk * BN + tl.arange(0, BN)
    nn = tl.minimum(n, R - 1).to(tl.int64)[:, None, None]  # clamped: loads need no row mask
    first = sid * iters_per_split
    last = tl.minimum(first + iters_per_split, n_iters)
    end_full = tl.minimum(last, n_full)
    if PDL:
        for j in tl.static_range(PDL_ITERS):
            _prefetch_weights(w_ptr, mant_ptr, code_ptr, nn, tl.maximum(tl.minimum(first + j, n_iters - 1), 0), K,
                              stride_w, n_groups, FORMAT, WORDS, G)
    await_inputs(PDL)
    rstd = 0.0
    if PRO == PRO_RMS_NORM:  # every program reads the whole row once (L2 hits after the first)
        start = tl.zeros((1, 1), tl.int64)
        sum_sq = row_sum_squares(x_ptr, x_ptr, start, start, K, 1, NORM_NCH, X_PAIRS, False, act_dtype)
        rstd = rstd_of(tl.sum(sum_sq, axis=0), K, eps)
    acc_lo = tl.zeros((BN, G, 16), dtype=tl.float32)
    acc_hi = tl.zeros((BN, G, 16), dtype=tl.float32)
    if PREFETCH:
        if DEPTH == 1:
            if end_full > first:
                # two register buffers, unrolled by two: each load lands in the buffer the previous
                # compute just freed, so the loop carries no register copies
                wa, xa = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, first,
                                         stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                for it in range(first + 1, end_full - 1, 2):
                    wb, xb = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, it,
                                             stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wa, xa, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                    wa, xa = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, it + 1,
                                             stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wb, xb, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                if (end_full - first) % 2 == 0:
                    wb, xb = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn,
                                             end_full - 1, stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wa, xa, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wb, xb, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                else:
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wa, xa, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
        else:
            # DEPTH 2: three register buffers, two iterations in flight while one is computed;
            # unrolled by three so that the loop carries no register copies
            n_it = end_full - first
            if n_it == 1:
                wa, xa = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, first,
                                         stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wa, xa, x_ptr, up_ptr, rstd,
                                                  FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
            elif n_it >= 2:
                wa, xa = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, first,
                                         stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                wb, xb = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, first + 1,
                                         stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                # a, b hold iterations i, i + 1 at the top of each pass
                for i in range(first, end_full - 4, 3):
                    wc, xc = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, i + 2,
                                             stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wa, xa, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                    wa, xa = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, i + 3,
                                             stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wb, xb, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                    wb, xb = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, i + 4,
                                             stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wc, xc, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                passes = tl.maximum(n_it - 2, 0) // 3   # = ceil((n_it - 4) / 3) passes when n_it > 4
                nxt = first + 3 * passes
                rem = end_full - nxt  # 2, 3 or 4 iterations left; a, b hold nxt, nxt + 1
                if rem == 2:
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wa, xa, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wb, xb, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                else:
                    wc, xc = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn, nxt + 2,
                                             stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                    acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wa, xa, x_ptr, up_ptr, rstd,
                                                      FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                    if rem == 4:
                        wa, xa = _unmasked_loads(x_ptr, up_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn,
                                                 nxt + 3, stride_w, n_groups, FORMAT, G, X_LATE, PRO, WCACHE)
                        acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wb, xb, x_ptr, up_ptr, rstd,
                                                          FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                        acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wc, xc, x_ptr, up_ptr, rstd,
                                                          FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                        acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wa, xa, x_ptr, up_ptr, rstd,
                                                          FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                    else:
                        acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wb, xb, x_ptr, up_ptr, rstd,
                                                          FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
                        acc_lo, acc_hi = _gemv_from_loads(acc_lo, acc_hi, wc, xc, x_ptr, up_ptr, rstd,
                                                          FORMAT, PRMT, G, X_LATE, PRO, act_dtype)
    else:
        for it in range(first, end_full):
            acc_lo, acc_hi = _gemv_iteration(acc_lo, acc_hi, x_ptr, up_ptr, rstd, w_ptr, mant_ptr, code_ptr, base_ptr,
                                             esc_ptr, nn, it, K, stride_w, n_groups, FORMAT, WORDS, X_PAIRS, G, False,
                                             PRMT, PRO, act_dtype)
    if last > tl.maximum(first, n_full):  # the masked tail iteration, n_full, is in this K range (not empty)
        acc_lo, acc_hi = _gemv_iteration(acc_lo, acc_hi, x_ptr, up_ptr, rstd, w_ptr, mant_ptr, code_ptr, base_ptr,
                                         esc_ptr, nn, n_full, K, stride_w, n_groups, FORMAT, WORDS, X_PAIRS, G, True,
                                         PRMT, PRO, act_dtype)
    return _tree_sum_rows(tl.reshape(acc_lo + acc_hi, (BN, G * 16)), BN, G * 16)


@triton.jit
def _gemv_work(pid_n, sid, x_ptr, up_ptr, y_ptr, bias_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, rows_ptr,
               ws_ptr, cnt_ptr, raw_ptr, raw_rows_ptr, res_ptr, R, K, stride_w, n_groups, n_iters, n_full,
               iters_per_split, R_raw, blocks_main, eps, pos_ptr, inv_freq_ptr, k_cache_ptr, v_cache_ptr, lens_ptr,
               slots_ptr, offsets_ptr, n_rows_ptr, stride_cb, stride_ch, stride_cs, max_seq, rope_scaling, H, KH,
               FORMAT: tl.constexpr, WORDS: tl.constexpr, X_PAIRS: tl.constexpr, BN: tl.constexpr, G: tl.constexpr,
               SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_ROWS: tl.constexpr, PRMT: tl.constexpr,
               PREFETCH: tl.constexpr, X_LATE: tl.constexpr, DEPTH: tl.constexpr, FUSE_RAW: tl.constexpr,
               RAW_PREFETCH: tl.constexpr, PRO: tl.constexpr, NORM_NCH: tl.constexpr, RESIDUAL: tl.constexpr,
               PDL: tl.constexpr, PDL_ITERS: tl.constexpr, ROPE_KV: tl.constexpr, HAS_SLOTS: tl.constexpr,
               HAS_OFFSETS: tl.constexpr, HAS_N_ROWS: tl.constexpr, WCACHE: tl.constexpr):
    """Work item (row block pid_n, K range sid) of `gemv_kernel`: the whole of what one program of the
    non-persistent grid does."""
    zero = tl.zeros((1, 1), tl.int32)
    if FUSE_RAW:
        if pid_n < blocks_main:
            part = _gemv_rows(x_ptr, up_ptr, y_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, eps, pid_n, sid, R, K,
                              stride_w, n_groups, n_iters, n_full, iters_per_split, FORMAT, WORDS, X_PAIRS, BN, G,
                              PRMT, PREFETCH, X_LATE, DEPTH, PRO, NORM_NCH, PDL, PDL_ITERS, WCACHE)
            n = pid_n * BN + tl.arange(0, BN)
            _finish(part[None, :], y_ptr, bias_ptr, rows_ptr, ws_ptr, cnt_ptr, res_ptr, zero, n[None, :], 1, R, 0, 0,
                    pid_n, sid, SPLIT, HAS_BIAS, HAS_ROWS, RESIDUAL)
        else:
            blk = pid_n - blocks_main
            part = _gemv_rows(x_ptr, up_ptr, y_ptr, raw_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, eps, blk, sid,
                              R_raw, K, K // 2, n_groups, n_iters, n_full, iters_per_split, FORMAT_BF16, True,
                              X_PAIRS, BN, G, PRMT, RAW_PREFETCH, X_LATE, DEPTH, PRO, NORM_NCH, PDL, PDL_ITERS,
                              WCACHE)
            n = blk * BN + tl.arange(0, BN)
            _finish(part[None, :], y_ptr, bias_ptr, raw_rows_ptr, ws_ptr + SPLIT * R, cnt_ptr, res_ptr, zero,
                    n[None, :], 1, R_raw, 0, 0, pid_n, sid, SPLIT, HAS_BIAS, True, RESIDUAL)
    else:
        part = _gemv_rows(x_ptr, up_ptr, y_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, eps, pid_n, sid, R, K,
                          stride_w, n_groups, n_iters, n_full, iters_per_split, FORMAT, WORDS, X_PAIRS, BN, G,
                          PRMT, PREFETCH, X_LATE, DEPTH, PRO, NORM_NCH, PDL, PDL_ITERS, WCACHE)
        n = pid_n * BN + tl.arange(0, BN)
        if ROPE_KV:
            part, done = _split_reduce(part[None, :], ws_ptr, cnt_ptr, n[None, :] < R, zero, n[None, :], 1, R,
                                       pid_n, sid, SPLIT)
            if done:
                if HAS_BIAS:
                    part = part + tl.load(bias_ptr + n[None, :]).to(tl.float32)
                y = round_to(part, y_ptr.dtype.element_ty)
                store_head(tl.reshape(y, (BN,)), pid_n, y_ptr, pos_ptr, inv_freq_ptr, k_cache_ptr, v_cache_ptr,
                           lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_cb, stride_ch, stride_cs, max_seq,
                           rope_scaling, H, KH, BN // 2, HAS_SLOTS, HAS_OFFSETS, HAS_N_ROWS)
        else:
            _finish(part[None, :], y_ptr, bias_ptr, rows_ptr, ws_ptr, cnt_ptr, res_ptr, zero, n[None, :], 1, R, 0, 0,
                    pid_n, sid, SPLIT, HAS_BIAS, HAS_ROWS, RESIDUAL)


@triton.jit
def gemv_kernel(x_ptr, up_ptr, y_ptr, bias_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, rows_ptr,
                ws_ptr, cnt_ptr, raw_ptr, raw_rows_ptr, res_ptr,
                R, K, stride_w, n_groups, n_iters, n_full, iters_per_split, R_raw, blocks_main, eps,
                pos_ptr, inv_freq_ptr, k_cache_ptr, v_cache_ptr, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr,
                stride_cb, stride_ch, stride_cs, max_seq, rope_scaling, H, KH,
                FORMAT: tl.constexpr, WORDS: tl.constexpr, X_PAIRS: tl.constexpr, BN: tl.constexpr,
                G: tl.constexpr, SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_ROWS: tl.constexpr,
                PRMT: tl.constexpr, PREFETCH: tl.constexpr, X_LATE: tl.constexpr, DEPTH: tl.constexpr,
                FUSE_RAW: tl.constexpr, RAW_PREFETCH: tl.constexpr, PRO: tl.constexpr,
                NORM_NCH: tl.constexpr = 1, RESIDUAL: tl.constexpr = False, PDL: tl.constexpr = False,
                PDL_ITERS: tl.constexpr = 0, ROPE_KV: tl.constexpr = False, HAS_SLOTS: tl.constexpr = False,
                HAS_OFFSETS: tl.constexpr = False, HAS_N_ROWS: tl.constexpr = False, WCACHE: tl.constexpr = 0,
                n_blocks=1, PERSISTENT: tl.constexpr = False):
    """y[0, rows[n]] = x[0] . w[n] (+ bias) for the R rows of this launch; grid (cdiv(R, BN), SPLIT).
    PREFETCH (needs bf16 pair words for w and x) issues the loads DEPTH iterations ahead of the
    compute; the order of the arithmetic is unchanged. PRO (module docstring): x = swiglu(x_ptr,
    up_ptr), or x = rms_norm(x_ptr) with weight up_ptr and `eps` (the row's sum of squares read in
    NORM_NCH chunks); with X_PAIRS both are int32 pair-word views. RESIDUAL: y =
    res + x w^T (`_finish`). PDL: launched with `launch_pdl` (launch_overlap.py); each program
    prefetches its first PDL_ITERS iterations' weights into L2 before it waits for the launch before.
    WCACHE: the prefetching loop's weight loads' cache policy (`_weight_load`; the same bits).

    FUSE_RAW (BF12): programs blocks_main.. of axis 0 compute the R_raw rows kept as raw bf16
    (`raw_ptr` int32 pair words, row stride K // 2, output rows `raw_rows_ptr`) with the bf16 code
    path, in the same launch instead of a second one; a row's result does not depend on which
    program computes it. Their split-K workspace follows the packed rows' (SPLIT * R floats).

    ROPE_KV (rope_kv_epilogue.py; BN = head_dim, R = (H + 2 KH) BN, no FUSE_RAW / HAS_ROWS /
    RESIDUAL): program n's tile is head n of y = [q | k | v]; the program that finishes it stores
    q heads rotated into y_ptr (q's buffer), k heads rotated and v heads into the KV cache (`pos_ptr`
    .. `KH`: rope_kv_write's arguments for one token).

    PERSISTENT: the grid is (P, 1) with P <= n_blocks * SPLIT, the non-persistent grid's work items
    (row block, K range); program p does items p, p + P, ... in turn (item w: row block w // SPLIT,
    K range w % SPLIT). Each item computes what that grid's program would, so the bits are the same;
    fewer programs are launched (one wave, no tail) and each starts its next item's loads as soon as it
    has stored the last one's partial."""
    launch_dependents()
    if PERSISTENT:
        for w in range(tl.program_id(0), n_blocks * SPLIT, tl.num_programs(0)):
            _gemv_work(w // SPLIT, w % SPLIT, x_ptr, up_ptr, y_ptr, bias_ptr, w_ptr, mant_ptr, code_ptr, base_ptr,
                       esc_ptr, rows_ptr, ws_ptr, cnt_ptr, raw_ptr, raw_rows_ptr, res_ptr, R, K, stride_w, n_groups,
                       n_iters, n_full, iters_per_split, R_raw, blocks_main, eps, pos_ptr, inv_freq_ptr, k_cache_ptr,
                       v_cache_ptr, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_cb, stride_ch, stride_cs,
                       max_seq, rope_scaling, H, KH, FORMAT, WORDS, X_PAIRS, BN, G, SPLIT, HAS_BIAS, HAS_ROWS, PRMT,
                       PREFETCH, X_LATE, DEPTH, FUSE_RAW, RAW_PREFETCH, PRO, NORM_NCH, RESIDUAL, PDL, PDL_ITERS,
                       ROPE_KV, HAS_SLOTS, HAS_OFFSETS, HAS_N_ROWS, WCACHE)
    else:
        _gemv_work(tl.program_id(0), tl.program_id(1), x_ptr, up_ptr, y_ptr, bias_ptr, w_ptr, mant_ptr, code_ptr,
                   base_ptr, esc_ptr, rows_ptr, ws_ptr, cnt_ptr, raw_ptr, raw_rows_ptr, res_ptr, R, K, stride_w,
                   n_groups, n_iters, n_full, iters_per_split, R_raw, blocks_main, eps, pos_ptr, inv_freq_ptr,
                   k_cache_ptr, v_cache_ptr, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_cb, stride_ch,
                   stride_cs, max_seq, rope_scaling, H, KH, FORMAT, WORDS, X_PAIRS, BN, G, SPLIT, HAS_BIAS, HAS_ROWS,
                   PRMT, PREFETCH, X_LATE, DEPTH, FUSE_RAW, RAW_PREFETCH, PRO, NORM_NCH, RESIDUAL, PDL, PDL_ITERS,
                   ROPE_KV, HAS_SLOTS, HAS_OFFSETS, HAS_N_ROWS, WCACHE)


@triton.jit
def _dot_acc(a, b, acc, DOT_BF16: tl.constexpr):
    """acc + a @ b in fp32: bf16 tensor cores, or fp32 operands (fp32/fp16 x), or in the
    interpreter a broadcast product summed by numpy (its BLAS matmul sums in an order that
    depends on the row's position in the tile, which the raw-row launch changes)."""
    if INTERPRET:
        return acc + tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)
    elif DOT_BF16:
        return tl.dot(a, b, acc)
    else:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")


@triton.jit
def _gemm_tile(w_ptr, nn, h, it, r: tl.constexpr, K, stride_w,
               FORMAT: tl.constexpr, BN: tl.constexpr, G: tl.constexpr, MASKED: tl.constexpr):
    """Weight tile [BN, 32 G] (bf16) of pair slot r: column c is k = (it G + c // 32) 128 + 32 r + c % 32."""
    if FORMAT == FORMAT_BF12:
        lo, hi = pair_to_bf16(h)
        return tl.reshape(tl.join(lo, hi), (BN, G * 32))
    else:
        c = tl.arange(0, G * 32)[None, :]
        k = (it * G + c // 32) * 128 + 32 * r + c % 32
        ptr = w_ptr + nn * stride_w + k
        if MASKED:
            return tl.load(ptr, mask=k < K, other=0.0)
        else:
            return tl.load(ptr)


@triton.jit
def _gemm_iteration(acc, x_ptr, up_ptr, rstd, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, m, nn, it, M, K,
                    stride_xm, stride_um, stride_w, n_groups,
                    FORMAT: tl.constexpr, BN: tl.constexpr, G: tl.constexpr, MASKED: tl.constexpr,
                    DOT_BF16: tl.constexpr, PRMT: tl.constexpr, SWAP: tl.constexpr, PRO: tl.constexpr,
                    ACT: tl.constexpr):
    """acc [BM, BN] += x w^T over one iteration, or with SWAP acc [BN, BM] += w x^T (the weights
    are then the MMA's A operand, which may come from registers). PRO: each x tile is
    swiglu(gate tile, up tile), rounded to ACT, the dtype the plain kernel's x tile has."""
    if FORMAT == FORMAT_BF12:
        h0, h1, h2, h3 = _pair_words(w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, nn[:, :, None], it, K,
                                     stride_w, n_groups, FORMAT, True, G, MASKED, PRMT)
    else:
        h0 = 0
        h1 = 0
        h2 = 0
        h3 = 0
    c = tl.arange(0, G * 32)[None, :]
    k = (it * G + c // 32) * 128 + c % 32  # [1, 32 G], pair slot r adds 32 r
    if SWAP:
        k = tl.trans(k)                    # [32 G, 1]
        x_cols = x_ptr + tl.trans(m) * stride_xm
        u_cols = up_ptr + tl.trans(m) * stride_um
        m_ok = tl.trans(m) < M
    else:
        x_cols = x_ptr + m * stride_xm
        u_cols = up_ptr + m * stride_um
        m_ok = m < M
    for r in tl.static_range(4):
        h = h0 if r == 0 else (h1 if r == 1 else (h2 if r == 2 else h3))
        w = _gemm_tile(w_ptr, nn, h, it, r, K, stride_w, FORMAT, BN, G, MASKED)
        if MASKED:
            x_ok = m_ok & (k + 32 * r < K)
        else:
            x_ok = m_ok
        x = tl.load(x_cols + k + 32 * r, mask=x_ok, other=0.0)
        if PRO:
            u = tl.load(u_cols + k + 32 * r, mask=x_ok, other=0.0)
            x = _prologue(x.to(tl.float32), u.to(tl.float32), rstd, ACT, PRO)
        if SWAP:
            acc = _dot_acc(w, x, acc, DOT_BF16)
        else:
            acc = _dot_acc(x, tl.trans(w), acc, DOT_BF16)
    return acc


@triton.jit
def gemm_kernel(x_ptr, up_ptr, y_ptr, bias_ptr, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, rows_ptr,
                ws_ptr, cnt_ptr, res_ptr,
                M, R, K, stride_xm, stride_um, stride_ym, stride_rm, stride_w, n_groups, n_iters, n_full,
                iters_per_split, eps,
                FORMAT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, G: tl.constexpr,
                SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_ROWS: tl.constexpr,
                DOT_BF16: tl.constexpr, PRMT: tl.constexpr, SWAP: tl.constexpr, PRO: tl.constexpr,
                NORM_NCH: tl.constexpr = 1, RESIDUAL: tl.constexpr = False, PDL: tl.constexpr = False,
                M_FASTEST: tl.constexpr = False):
    """y[m, rows[n]] = x[m] . w[n] (+ bias); grid (cdiv(R, BN), SPLIT, cdiv(M, BM)), or with M_FASTEST
    (cdiv(M, BM), SPLIT, cdiv(R, BN)): the same tiles, the same bits, launched in another order. PRO (module
    docstring): x = swiglu(x_ptr, up_ptr), up's rows `stride_um` apart, or x = rms_norm(x_ptr) with
    weight up_ptr (stride_um = 0) and `eps`. RESIDUAL: y = res + x w^T (`_finish`), res's rows
    `stride_rm` apart. PDL: launched with `launch_pdl`; waits for the launch before first."""
    launch_dependents()
    await_inputs(PDL)
    act_dtype = y_ptr.dtype.element_ty  # the activation dtype: x, up and y share it
    if M_FASTEST:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(2)
        n_blocks = tl.num_programs(2)
    else:
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(2)
        n_blocks = tl.num_programs(0)
    m = pid_m * BM + tl.arange(0, BM)[:, None]
    n = pid_n * BN + tl.arange(0, BN)
    nn = tl.minimum(n, R - 1).to(tl.int64)[:, None]
    rstd = 0.0
    if PRO == PRO_RMS_NORM:  # rows past M repeat row M - 1 (their x loads are masked to 0)
        x_rows = tl.minimum(m, M - 1).to(tl.int64) * stride_xm
        rstd = rstd_of(row_sum_squares(x_ptr, x_ptr, x_rows, x_rows, K, BM, NORM_NCH, False, False, act_dtype, True),
                       K, eps)
        if SWAP:
            rstd = rstd[None, :]   # x tiles are [32 G, BM]
        else:
            rstd = rstd[:, None]
    if SWAP:
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    first = tl.program_id(1) * iters_per_split
    last = tl.minimum(first + iters_per_split, n_iters)
    for it in range(first, tl.minimum(last, n_full)):
        acc = _gemm_iteration(acc, x_ptr, up_ptr, rstd, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, m, nn, it, M, K,
                              stride_xm, stride_um, stride_w, n_groups, FORMAT, BN, G, False, DOT_BF16, PRMT, SWAP,
                              PRO, act_dtype)
    if last > tl.maximum(first, n_full):  # the masked tail iteration, n_full, is in this K range (not empty)
        acc = _gemm_iteration(acc, x_ptr, up_ptr, rstd, w_ptr, mant_ptr, code_ptr, base_ptr, esc_ptr, m, nn, n_full, M, K,
                              stride_xm, stride_um, stride_w, n_groups, FORMAT, BN, G, True, DOT_BF16, PRMT, SWAP,
                              PRO, act_dtype)
    if SWAP:
        acc = tl.trans(acc)
    tile = pid_m * n_blocks + pid_n
    _finish(acc, y_ptr, bias_ptr, rows_ptr, ws_ptr, cnt_ptr, res_ptr, m, n[None, :], M, R, stride_ym, stride_rm,
            tile, tl.program_id(1), SPLIT, HAS_BIAS, HAS_ROWS, RESIDUAL)
