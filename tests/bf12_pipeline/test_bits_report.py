"""specir.bf12.report: bits per weight, all metadata counted: the shipped pair within the 12.35
target; the row-sample estimate's arithmetic (the inflated 8B figures are in docs/BF12_BITS.md,
with a check of the estimate against whole matrices at a smaller shape)."""
from __future__ import annotations

import math

from specir.bf12.report import add_total, estimate_raw_rows, gaussian_8b, shipped_pair, table
from specir.zoo.shapes import get_shape


def test_shipped_pair_bits_are_within_target():
    pair = shipped_pair()
    for name, rows in pair.items():
        assert add_total(rows).bits <= 12.35, (name, table(rows))
    assert "lm_head" in pair["code-target"] and "lm_head" not in pair["code-drafter"]  # the drafter's is tied


def test_raw_row_estimate_scales_samples_to_their_strata():
    import torch
    torch.manual_seed(0)  # random rows are raw too now and then; this draw has none
    w = (torch.randn(64, 256) * 0.02).to(torch.bfloat16)
    w[:8, 0], w[:8, 1] = 2.0 ** -60, 2.0 ** 8  # 8 raw rows of 64
    raw, looked, seen = estimate_raw_rows([(w, 640)])
    assert (raw, looked, seen) == (80.0, 64, 8)
    gauss = gaussian_8b(rows=8)
    assert math.isclose(add_total(gauss).weights, get_shape("llama-3.1-8b").parameters()
                        - 2 * 128256 * 4096 - 65 * 4096 + 128256 * 4096)
