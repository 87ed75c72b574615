"""Stacking BF12 matrices along the output rows without decoding them.

BF12 packs every row on its own (its groups run along K), so the BF12 form of
`torch.cat([W1, W2, ...])` is the planes stacked in order, the raw rows stacked and their indices
offset: `concat_rows([pack(W1), pack(W2)])` equals `pack(torch.cat([W1, W2]))` tensor for tensor.
A backend that runs q|k|v or gate|up as one GEMV over concatenated rows (as it does for bf16) uses
this for packed weights, so both formats get the same launch shapes, configurations and bits.
"""
from __future__ import annotations

import torch

from .matrix import BF12Matrix


def concat_rows(matrices: list[BF12Matrix]) -> BF12Matrix:
    if not matrices:
        raise ValueError("concat_rows needs at least one matrix")
    k = matrices[0].shape[1]
    if any(m.shape[1] != k for m in matrices):
        raise ValueError(f"matrices have different K: {[m.shape[1] for m in matrices]}")
    if len(matrices) == 1:
        return matrices[0]
    offsets, n = [], 0
    for m in matrices:
        offsets.append(n)
        n += m.shape[0]
    cat = lambda name: torch.cat([getattr(m, name) for m in matrices]).contiguous()  # noqa: E731
    raw_rows = torch.cat([m.raw_rows + off for m, off in zip(matrices, offsets)]).to(torch.int32)
    return BF12Matrix((n, k), cat("mant"), cat("code"), cat("base"), cat("esc"), cat("raw"), raw_rows)
