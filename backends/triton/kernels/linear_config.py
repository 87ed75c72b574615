"""Block sizes for the linear kernels, per (M, N, K): a small heuristic table.

The order of fp32 operations is fixed by `kind`, `groups`, `split`, `block_m` and (for the
GEMM, whose MMA instruction shape can depend on them) `block_n` and `num_warps`. Those are chosen
from (M, N, K) only, never from the weight format, so the bf16 and BF12 kernels agree bit for bit.
For the GEMV `block_n`, `num_warps` and `num_stages` do not change the order and may be tuned
per format (`GEMV_FORMAT_OVERRIDES`, filled from `python bench/gemv.py --tune`). The GEMM's tiling may be
replaced per (row band, N, K) by a measured one (`GEMM_TILES`, from `python bench/gemm_tune.py --apply`), the
same for every format.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

GROUP = 128
TARGET_PROGRAMS = 4 * 132   # aim for about four programs per SM of an H100/H200
MAX_SPLIT = 16
MIN_ITERS_PER_SPLIT = 4      # shorter K ranges spend more on prologue/epilogue than they gain


@dataclass(frozen=True)
class LinearConfig:
    kind: str            # "gemv" (M = 1, fma) or "gemm" (tl.dot)
    block_n: int         # weight rows per program
    groups: int          # 128-weight groups per K iteration (BK = 128 * groups)
    split: int           # K ranges reduced in a fixed order (split-K)
    block_m: int = 1     # GEMM rows of x per program
    num_warps: int = 4
    num_stages: int = 2
    prmt: bool = True    # BF12 sign/mantissa via one `prmt` per pair (GPU; exact either way)
    prefetch: bool = True  # GEMV: load iteration i+1 while computing iteration i
    swap_ab: bool = False  # GEMM: compute y^T = w x^T (weights as the MMA's A operand)
    # GEMV only, none of these changes the order of the arithmetic:
    depth: int = 1         # iterations of loads in flight ahead of the compute (1 or 2 register buffers)
    x_late: bool = False   # load x at compute time (L1 hits) instead of carrying it in the prefetch buffers
    fuse_raw: bool = True  # BF12: raw rows in the same launch (extra programs) instead of a second launch
    maxnreg: int | None = None  # register cap per thread (ptxas .maxnreg): more programs per SM
    # launched overlapped (launch_overlap.py): iterations of weights prefetched into L2 before the wait. 0: the
    # 8B GEMV chain (bench/gemv_chain.py, H100, session 23) ran 5.05 ms overlapped without, 5.42 ms with 4, 5.14 plain
    overlap_iters: int = 0
    # GEMV: the cache policy of the prefetching loop's weight loads: "" (default), "cg" (L2 only: the streamed weights
    # leave L1 to x, the BF12 tables and the norm's row), "evict_first" (evict-first in L1, a hint in L2); on an H100
    # "cg" changed BF12's chain by +0.3 % and bf16's by -3 % (session 25, bench/gemv_chain.py)
    weight_cache: str = ""
    # GEMV: a persistent grid of `persistent` programs per SM (0: off), each doing the plain grid's (row block, K
    # range) work items in turn (linear_kernels.gemv_kernel PERSISTENT): one wave, no tail. Without `maxnreg` the
    # registers are capped so that that many programs fit on an SM; with it, fewer per SM where they do not fit.
    # Off: on an H100 the 8B GEMV chain ran 16 % (bf16) and 32 % (BF12) slower with 4 (session 25)
    persistent: int = 0
    # GEMM: the grid enumerates a weight block's row tiles first (grid (row tiles, split, weight blocks)), so that the
    # programs reading one block of weights run together and share its L2 lines; off: weight blocks first, each row
    # tile's pass over the weights apart (one that overflows L2 is read from DRAM once per row tile). Order-neutral
    m_fastest: bool = False

    def __post_init__(self):
        if self.weight_cache not in WEIGHT_CACHE:
            raise ValueError(f"weight_cache {self.weight_cache!r}: one of {sorted(WEIGHT_CACHE)}")

    def order_key(self) -> tuple:
        """The fields that define the reduction order (must match between formats)."""
        if self.kind == "gemv":
            return (self.kind, self.groups, self.split)
        return (self.kind, self.groups, self.split, self.block_m, self.block_n, self.num_warps, self.swap_ab)


# LinearConfig.weight_cache -> linear_kernels' WCACHE constexpr
WEIGHT_CACHE = {"": 0, "cg": 1, "evict_first": 2}

# M = 1 on tensor cores (y^T = w x^T, x padded to 16 columns) instead of the fma GEMV; both are
# exact and format-consistent; which is faster is measured by bench/gemv.py (column "M=1 on MMA").
GEMV_ON_MMA = False

# GEMV fields that do not change the order of the arithmetic (may differ between formats)
GEMV_ORDER_NEUTRAL = frozenset({"block_n", "num_warps", "num_stages", "prmt", "prefetch", "depth", "x_late",
                                "fuse_raw", "maxnreg", "overlap_iters", "weight_cache",
                                "persistent"})

# (format, N, K) -> fields replacing the table's GEMV choice; only order-neutral fields allowed.
GEMV_FORMAT_OVERRIDES: dict[tuple[str, int, int], dict] = {}

# (row band, N, K) -> fields replacing the rule's GEMM choice, measured by bench/gemm_tune.py (--apply writes it); the
# row band is gemm_row_band(rows): 16, 32, 64 or 128 for 2-16, 17-32, 33-64 and 65-128 rows (a 64-node tree's verify:
# 65). Forwards of more rows (prefill) keep the rule. One entry serves every format, so bf16 and BF12 keep one order.
GEMM_TILES: dict[tuple[int, int, int], dict] = {}
GEMM_FIELDS = frozenset({"block_m", "block_n", "num_warps", "num_stages", "groups", "split", "swap_ab", "m_fastest"})


def _pow2_at_most(v: int) -> int:
    return 1 << (max(v, 1).bit_length() - 1)


def _split_for(blocks: int, iters: int) -> int:
    """Smallest power of two that gives about TARGET_PROGRAMS programs while every split keeps
    at least MIN_ITERS_PER_SPLIT iterations."""
    split = 1
    while (blocks * split < TARGET_PROGRAMS and split * 2 <= MAX_SPLIT
           and iters >= 2 * split * MIN_ITERS_PER_SPLIT):
        split *= 2
    return split


def prefetching_its_range(cfg: LinearConfig, k: int) -> LinearConfig:
    """`cfg` with every K iteration of a program's range (one of `split`) prefetched into L2 before its wait when
    launched overlapped (`overlap_iters`; fusion{attention_prefetch}). A persistent GEMV prefetches the first work
    item's range only."""
    iterations = -(-(-(-k // GROUP)) // cfg.groups)
    return replace(cfg, overlap_iters=-(-iterations // cfg.split))


def gemm_row_band(m: int) -> int:
    """GEMM_TILES' row band of m rows: the next power of two, at least 16 (the rule's block_m up to 128 rows)."""
    return max(16, 1 << (m - 1).bit_length())


def choose(m: int, n: int, k: int, fmt: str = "bf16") -> LinearConfig:
    """The launch configuration for y[m, n] = x[m, k] @ w[n, k]^T in format `fmt`."""
    groups_total = -(-k // GROUP)
    if m == 1 and not GEMV_ON_MMA:
        # block_n * groups <= 64 keeps the per-group exponents in the weights' register layout
        # (larger tiles make Triton 3.6 route them through shared memory every iteration).
        groups = 1
        block_n = 64 if n >= 4096 else 32
        iters = groups_total
        cfg = LinearConfig("gemv", block_n, groups, _split_for(-(-n // block_n), iters),
                           num_warps=4, num_stages=2)
        if fmt == "bf12":
            # x loaded at compute time (L1 hits): 168 -> 128 registers, 3 -> 4 programs per SM,
            # 36 -> 48 KB of weight loads in flight per SM (docs/BF12.md, "Performance notes")
            cfg = replace(cfg, x_late=True)
        over = GEMV_FORMAT_OVERRIDES.get((fmt, n, k))
        if over:
            assert set(over) <= GEMV_ORDER_NEUTRAL, over
            cfg = replace(cfg, **over)
        return cfg
    block_m = min(128, gemm_row_band(m))
    # y^T = w x^T for every M: the decoded weights feed wgmma's A operand straight from registers
    # (block_n 64 x one group x 4 warps keeps Triton 3.6 from staging them through shared memory:
    # block_n 128 or 8 warps add a shared-memory round trip per weight, see bench/sass_count.py).
    # M > 64 used x w^T with block_n 32 and 8 warps until 2026-11-30: x was re-read from L2 four
    # times per weight byte and BF12's B operand went through shared memory (H200: lm_head M=128
    # bf16 934 us, cuBLAS 275 us); now wgmma N = block_m = 128.
    block_n, groups, num_warps, swap = 64, 1, 4, True
    iters = -(-groups_total // groups)
    split = _split_for(-(-n // block_n) * -(-m // block_m), iters)
    cfg = LinearConfig("gemm", block_n, groups, split, block_m, num_warps, num_stages=2, swap_ab=swap)
    over = GEMM_TILES.get((gemm_row_band(m), n, k))
    if over:
        assert set(over) <= GEMM_FIELDS, over
        cfg = replace(cfg, **over)
    return cfg


def head_tiles(cfg: LinearConfig, head_dim: int) -> LinearConfig:
    """A GEMV configuration with one head of `head_dim` rows per program (the rope + KV-write epilogue,
    rope_kv_epilogue.py): order-neutral fields only, so the bits are cfg's. 128 registers: without
    the cap the 8-warp head-128 tile takes 170 (compile_check), half the programs per SM."""
    return replace(cfg, block_n=head_dim, num_warps=max(4, head_dim // 16), maxnreg=128)
