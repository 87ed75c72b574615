"""`vocab_scatter` (specir/ir/ops_vocab.py) in one launch: out[b, t, v] = x[b, t, inverse[v]] where
inverse[v] >= 0, else -inf. `inverse` [vocab] int32 is the kept ids' inverse map (`inverse_ids`),
built once per model from the ids weight, so every output element is written by exactly one
program (a fill and a scatter in one launch). A copy: bit-exact. One program per (row, block of ids).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


def inverse_key(ids_weight: str) -> str:
    """The prepared-weights table entry holding the inverse map of the ids weight `ids_weight`."""
    return f"{ids_weight}.inverse"


def inverse_ids(ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """[vocab] int32: the position of each id in `ids`, -1 for ids not kept."""
    inverse = torch.full((vocab,), -1, dtype=torch.int32, device=ids.device)
    inverse[ids.long()] = torch.arange(ids.numel(), dtype=torch.int32, device=ids.device)
    return inverse


@triton.jit
def _vocab_scatter_kernel(x_ptr, inv_ptr, out_ptr, T, V, sxb, sxt, sob, sot, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    b, t = row // T, row % T
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = cols < V
    pos = tl.load(inv_ptr + cols, mask=inside, other=-1)
    kept = pos >= 0
    x = tl.load(x_ptr + b * sxb + t * sxt + tl.maximum(pos, 0).to(tl.int64), mask=inside & kept, other=0.0)
    y = tl.where(kept, x.to(tl.float32), float("-inf"))
    tl.store(out_ptr + b * sob + t * sot + cols, y.to(out_ptr.dtype.element_ty), mask=inside)


def vocab_scatter(x: torch.Tensor, inverse: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """x [B, T, N] (unit last stride) -> out [B, T, vocab] (vocab = inverse's length)."""
    B, T, _ = x.shape
    V = inverse.shape[0]
    out = torch.empty(B, T, V, dtype=x.dtype, device=x.device) if out is None else out
    if B * T:
        _vocab_scatter_kernel[(B * T, triton.cdiv(V, BLOCK))](
            x, inverse, out, T, V, x.stride(0), x.stride(1), out.stride(0), out.stride(1), BLOCK=BLOCK)
    return out
