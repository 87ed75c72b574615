"""RMSNorm's reduction in one fixed order, shared by the norm kernel and the linear kernels' norm prologue.

A row's sum of squares is accumulated in LANES lanes of element pairs: pair j of the row (elements
2j, 2j + 1) goes to lane j % LANES, and each lane takes its pairs in row order with one explicit
fma per element (even and odd elements in two accumulators); the 2 * LANES lane sums are then
added by one binary tree (even + odd of a lane, then adjacent lanes, log2 LANES levels). Zeros past
the row add exactly +0, and nothing depends on a kernel's block size, chunking or layout
(num_warps), so the standalone norm (norm.py, `fixed_order=True`) and a linear kernel's prologue
(linear_kernels.py)
get the same fp32 sum, hence the same rstd and the same normalised bits. The fma's are explicit so
that the compiler's fp contraction cannot round one kernel differently from the other.

Rows of up to UNROLLED_CHUNKS chunks are read in an unrolled loop (all loads in flight at once);
longer rows in a runtime loop, in the same order.

`rms_normed` is HF Llama's order: x * rstd rounded to the activation dtype, times the weight,
rounded again (KERNEL_CONTRACTS.md).
"""
import triton
import triton.language as tl

from ._numerics import round_to
from .linear_decode import pair_to_f32

LANES = tl.constexpr(128)
UNROLLED_CHUNKS = tl.constexpr(64)


def chunks(n: int) -> int:
    """Chunks of LANES pairs covering a row of n elements (the kernels' NCH constexpr)."""
    return max(1, -(-n // (2 * LANES.value)))


@triton.jit
def _lane_tree(v, BM: tl.constexpr, L: tl.constexpr):
    """Sum [BM, L] along L (L a power of two) by the fixed tree (adjacent pairs, log2 L levels), each
    level a sum over an axis of two: one add a pair whatever the layout. (The GEMV's tl.split tree
    gives the same values, but on these few-row tensors its layouts spill: sm_90, 49k local-memory
    instructions in the norm kernel at 8 warps, none this way.)"""
    for level in tl.static_range(16):
        if (L >> level) > 1:
            v = tl.sum(tl.reshape(v, (BM, L >> (level + 1), 2)), axis=2)
    return tl.reshape(v, (BM,))


@triton.jit
def _pairs(x_ptr, row, w, n, PAIRS: tl.constexpr):
    """fp32 (even, odd) elements of pairs `w` at row offset `row` (0 past n); PAIRS: x_ptr is an
    int32 view of bf16 pairs and `row` is in words."""
    if PAIRS:
        return pair_to_f32(tl.load(x_ptr + row + w, mask=2 * w < n, other=0).to(tl.uint32, bitcast=True))
    else:
        lo = tl.load(x_ptr + row + 2 * w, mask=2 * w < n, other=0.0).to(tl.float32)
        hi = tl.load(x_ptr + row + 2 * w + 1, mask=2 * w + 1 < n, other=0.0).to(tl.float32)
        return lo, hi


@triton.jit
def _accumulate(acc_lo, acc_hi, x_ptr, res_ptr, row, res_row, c, n, PAIRS: tl.constexpr, HAS_RES: tl.constexpr,
                ACT: tl.constexpr):
    w = c * LANES + tl.arange(0, LANES)[None, :]
    lo, hi = _pairs(x_ptr, row, w, n, PAIRS)
    if HAS_RES:  # the row is x + res, rounded to ACT (the add + norm kernel's sum)
        r_lo, r_hi = _pairs(res_ptr, res_row, w, n, PAIRS)
        lo = round_to(lo + r_lo, ACT).to(tl.float32)
        hi = round_to(hi + r_hi, ACT).to(tl.float32)
    return tl.fma(lo, lo, acc_lo), tl.fma(hi, hi, acc_hi)


@triton.jit
def row_sum_squares(x_ptr, res_ptr, row, res_row, n, BM: tl.constexpr, NCH: tl.constexpr, PAIRS: tl.constexpr,
                    HAS_RES: tl.constexpr, ACT: tl.constexpr, ROLLED: tl.constexpr = False):
    """Sum of squares [BM] (fp32, the fixed order) of BM rows of n elements at offsets `row` [BM, 1]
    (in x_ptr's elements: words with PAIRS), NCH = chunks(n). HAS_RES: of the rows x + res rounded
    to ACT (`res_row` offsets in res_ptr). The caller clamps rows past its count to real rows.
    ROLLED: a loop over the chunks even where they would be unrolled (the same order): BM rows of
    unrolled loads in flight cost the GEMM's prologue 255 registers (compile_check)."""
    acc_lo = tl.zeros((BM, LANES), dtype=tl.float32)
    acc_hi = tl.zeros((BM, LANES), dtype=tl.float32)
    if NCH <= UNROLLED_CHUNKS and not ROLLED:
        for c in tl.static_range(NCH):
            acc_lo, acc_hi = _accumulate(acc_lo, acc_hi, x_ptr, res_ptr, row, res_row, c, n, PAIRS, HAS_RES, ACT)
    else:
        for c in range(0, NCH):
            acc_lo, acc_hi = _accumulate(acc_lo, acc_hi, x_ptr, res_ptr, row, res_row, c, n, PAIRS, HAS_RES, ACT)
    return _lane_tree(acc_lo + acc_hi, BM, LANES)


@triton.jit
def rstd_of(sum_sq, n, eps):
    """1 / sqrt(mean square + eps) from the tree's sum over n elements."""
    return tl.rsqrt(sum_sq / n + eps)


@triton.jit
def rms_normed(x, rstd, w, ACT: tl.constexpr):
    """HF's RMSNorm of fp32 `x` (values of ACT) with weight `w` (fp32 values): an ACT tensor."""
    return round_to(w * round_to(x * rstd, ACT).to(tl.float32), ACT)
