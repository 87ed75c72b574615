"""Embedding lookup: out[n, :] = table[ids[n], :]; ids outside [0, V) give zero rows (so a
padding id such as -1 is harmless). Grid: tokens x column blocks; each row is read once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _embedding_kernel(ids_ptr, table_ptr, out_ptr, stride_table, stride_out, vocab, width,
                      BLOCK: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    token = tl.load(ids_ptr + n).to(tl.int64)
    valid = (token >= 0) & (token < vocab)
    row = tl.where(valid, token, 0)
    ok = cols < width
    x = tl.load(table_ptr + row * stride_table + cols, mask=tl.where(valid, ok, False), other=0.0)
    tl.store(out_ptr + n * stride_out + cols, x, mask=ok)


def embedding(ids: torch.Tensor, table: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """ids [...] (int32/int64), table [V, hidden] -> [..., hidden] in table.dtype."""
    vocab, width = table.shape
    if table.stride(1) != 1:
        raise ValueError("table rows must be contiguous")
    if out is None:
        out = torch.empty(*ids.shape, width, dtype=table.dtype, device=table.device)
    flat_ids = ids.reshape(-1).contiguous()
    out2 = out.view(-1, width)
    n = flat_ids.numel()
    if n:
        block = min(BLOCK, triton.next_power_of_2(width))
        _embedding_kernel[(n, triton.cdiv(width, block))](
            flat_ids, table, out2, table.stride(0), out2.stride(0), vocab, width,
            BLOCK=block, num_warps=4)
    return out
