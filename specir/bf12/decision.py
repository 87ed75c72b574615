"""Does BF12 pay for a given weight matrix? Called by the pack-weights pass.

BF12 is lossless for every matrix; it pays when it stores clearly fewer bytes than bf16 and the
matrix is large enough that reading it dominates the kernel's time.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .layout import GROUP
from .stats import MatrixStats, analyze

MAX_BITS_PER_WEIGHT = 13.0      # above this the saving (<19%) no longer covers the decode
MAX_ZERO_FRACTION = 0.25        # heavily sparse: a sparse format is the better tool
MIN_ELEMENTS = 64 * GROUP       # tiny matrices: launch overhead dominates, keep bf16


@dataclass(frozen=True)
class PackDecision:
    pack: bool
    reason: str
    stats: MatrixStats | None = None


def decide(w: torch.Tensor, *, max_bits: float = MAX_BITS_PER_WEIGHT,
           max_zero_fraction: float = MAX_ZERO_FRACTION, min_elements: int = MIN_ELEMENTS) -> PackDecision:
    """Whether to pack `w` as BF12, with a one-line reason either way."""
    return decide_for(tuple(w.shape), w.dtype, lambda: analyze(w), max_bits=max_bits,
                      max_zero_fraction=max_zero_fraction, min_elements=min_elements)


def decide_for(shape: tuple, dtype: torch.dtype, stats_of: Callable[[], MatrixStats], *,
               max_bits: float = MAX_BITS_PER_WEIGHT, max_zero_fraction: float = MAX_ZERO_FRACTION,
               min_elements: int = MIN_ELEMENTS) -> PackDecision:
    """`decide` for a matrix known by its shape and dtype; `stats_of()` gives its statistics (called
    only when they are needed: the pack-weights pass serves them from a cache, specir.bf12.stats_cache)."""
    if len(shape) != 2:
        return PackDecision(False, f"not a matrix (shape {tuple(shape)})")
    if dtype != torch.bfloat16:
        return PackDecision(False, f"weights are {dtype}; BF12 is lossless only for bf16")
    numel = shape[0] * shape[1]
    if numel < min_elements:
        return PackDecision(False, f"too small ({numel} < {min_elements} weights) to be worth a packed kernel")
    s = stats_of()
    n, k = s.shape
    zero_fraction = s.zeros / (n * k)
    if zero_fraction > max_zero_fraction:
        return PackDecision(False, f"heavily sparse ({zero_fraction:.1%} zeros): keep bf16", s)
    if s.bits_per_weight > max_bits:
        return PackDecision(False, f"exponents too spread: {s.raw_rows}/{n} rows need raw bf16, "
                                   f"{s.bits_per_weight:.2f} bits/weight > {max_bits}", s)
    return PackDecision(True, f"{s.bits_per_weight:.3f} bits/weight ({16 / s.bits_per_weight:.3f}x fewer bytes), "
                              f"{s.raw_rows} raw rows, {s.escapes} escapes", s)
