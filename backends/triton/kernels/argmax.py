"""Row-wise argmax over the vocabulary (greedy target choice), in two passes.

Pass 1: grid (rows, chunks); each program scans one chunk of a row and writes its (max, first
index of the max). Pass 2: one program per row picks the largest chunk maximum, the lowest chunk
on ties, so the result is the first index of the row maximum, as torch.argmax. NaN logits are
ignored (torch would return the NaN's index). The chunk count depends only on shapes, so the
pair is CUDA-graph safe; batch-1 decode gets enough programs to read the logits at HBM speed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._device import sm_count

BLOCK = 1024
MAX_CHUNKS = 256


@triton.jit
def _argmax_chunks_kernel(logits_ptr, max_ptr, idx_ptr, stride_row, V, chunk, num_chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    start = c * chunk
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    best_idx = tl.full([BLOCK], 2147483647, tl.int32)
    for off in range(0, chunk, BLOCK):
        cols = start + off + tl.arange(0, BLOCK)
        x = tl.load(logits_ptr + row * stride_row + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        better = x > best                      # strict: keeps the first index per lane
        best = tl.where(better, x, best)
        best_idx = tl.where(better, cols, best_idx)
    top = tl.max(best, 0)
    top_idx = tl.min(tl.where(best == top, best_idx, 2147483647), 0)
    tl.store(max_ptr + row * num_chunks + c, top)
    tl.store(idx_ptr + row * num_chunks + c, top_idx)


@triton.jit
def _argmax_reduce_kernel(max_ptr, idx_ptr, out_ptr, num_chunks, BLOCK_C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK_C)
    ok = c < num_chunks
    m = tl.load(max_ptr + row * num_chunks + c, mask=ok, other=float("-inf"))
    i = tl.load(idx_ptr + row * num_chunks + c, mask=ok, other=2147483647)
    top = tl.max(m, 0)
    first = tl.min(tl.where(ok & (m == top), i, 2147483647), 0)
    # a row of only -inf/NaN: index 0
    tl.store(out_ptr + row, tl.where(first == 2147483647, 0, first).to(out_ptr.dtype.element_ty))


def argmax_config(rows: int, vocab: int, device) -> tuple[int, int]:
    """(num_chunks, chunk length): about four programs per SM, chunks a multiple of BLOCK."""
    block = min(BLOCK, triton.next_power_of_2(vocab))
    chunks = max(1, min(triton.cdiv(4 * sm_count(device), rows), triton.cdiv(vocab, block), MAX_CHUNKS))
    chunk = triton.cdiv(triton.cdiv(vocab, chunks), block) * block
    return triton.cdiv(vocab, chunk), chunk


def argmax(logits: torch.Tensor, out: torch.Tensor | None = None, workspace: torch.Tensor | None = None):
    """logits [..., V] -> first index of each row's maximum, [...] int64 (or out's dtype).

    `workspace`: optional fp32 tensor with >= 2 * rows * num_chunks elements (argmax_config)."""
    vocab = logits.shape[-1]
    if logits.stride(-1) != 1:
        raise ValueError("logits need a contiguous last dim")
    rows2 = logits.reshape(-1, vocab)
    rows = rows2.shape[0]
    out = torch.empty(logits.shape[:-1], dtype=torch.int64, device=logits.device) if out is None else out
    if rows == 0:
        return out
    chunks, chunk = argmax_config(rows, vocab, logits.device)
    need = 2 * rows * chunks
    if workspace is None:
        workspace = torch.empty(need, dtype=torch.float32, device=logits.device)
    elif workspace.dtype != torch.float32 or workspace.numel() < need:
        raise ValueError(f"workspace must be fp32 with >= {need} elements")
    maxima = workspace[: rows * chunks]
    indices = workspace[rows * chunks: need].view(torch.int32)
    block = min(BLOCK, triton.next_power_of_2(vocab))
    _argmax_chunks_kernel[(rows, chunks)](rows2, maxima, indices, rows2.stride(0), vocab, chunk, chunks,
                                          BLOCK=block, num_warps=4)
    _argmax_reduce_kernel[(rows,)](maxima, indices, out.view(-1), chunks,
                                   BLOCK_C=triton.next_power_of_2(chunks), num_warps=1)
    return out
