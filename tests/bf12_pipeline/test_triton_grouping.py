"""Packed weights in the Triton executor's plan: stacking BF12 matrices equals packing the
stacked matrix, and packed linears are grouped exactly like plain ones (QKV, gate|up), so a
packed model's launches have the N, split-K and summation order of its unpacked twin."""
from __future__ import annotations

import torch

from specir.bf12 import pack
from specir.bf12.concat import concat_rows
from tests.bf12_pipeline.test_reference_exactness import plain_and_packed


def test_concat_rows_equals_packing_the_concatenation():
    ws = [(torch.randn(n, 300) * 0.02).to(torch.bfloat16) for n in (70, 33, 128)]
    ws[1][5, 0], ws[1][5, 1] = 2.0 ** -60, 2.0 ** 8  # a raw row in the middle matrix
    ws[2][0, :2] = torch.tensor([2.0 ** -60, 2.0 ** 8])
    got, want = concat_rows([pack(w) for w in ws]), pack(torch.cat(ws))
    # the two planted rows are raw; random rows may add a few more (a row spanning > 15 binades)
    assert got.shape == want.shape and got.raw_row_count == want.raw_row_count >= 2
    assert {70 + 5, 70 + 33} <= set(got.raw_rows.tolist())
    for name in ("mant", "code", "base", "esc", "raw", "raw_rows", "rows"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name


def test_triton_plan_groups_packed_linears_like_plain_ones(wide_pair):
    from specir.backends.triton.program import plan_program
    plain, packed = plain_and_packed(wide_pair[0], wide_pair[1])

    def linear_shapes(model):
        program = plan_program(model)
        return [tuple(launch.ops) for launch in program.launches if launch.kind in ("linear", "packed_linear")]
    assert linear_shapes(packed.model("drafter")) == linear_shapes(plain.model("drafter"))
