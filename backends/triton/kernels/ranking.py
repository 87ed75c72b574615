"""Ranking a drafter's logits in two launches: each row's k largest log-probabilities with their
token ids, or one token's log-probability (the contract of specir/step/ranking.py, for
TritonStepBackend.top_log_probs / log_prob_of).

Pass 1, grid (rows, chunks): each program reads one CHUNK-long slice of a row once (any float
dtype, computed in fp32) and writes the slice's maximum m, its sum s of exp(x - m), and with K > 0
its K largest logits and their ids, largest first, the lowest id first among equals (a slice with
fewer than K columns pads with -inf and id -1). Pass 2, one program per row: the log normaliser
lse = M + log(sum_c s_c exp(m_c - M)) (M the largest m_c; -inf for a row of -inf), then either
the K largest of the row's candidates minus lse (the same tie rule: ids ascending among equal
logits) or the logit of the given token minus lse. NaN logits count as -inf.

This replaces torch's multi-block radix top-k plus a max, a subtract, an exp and a sum (about ten
launches per ranking, each a pass over the V-wide row) by one read of the logits and a merge of
chunks x K candidates. Shapes alone fix the chunking, so both launches are CUDA-graph safe.
Against specir/step/ranking.py: the same ids up to the order of equal logits (torch.topk leaves
it unspecified), log-probabilities within fp32 rounding (the torch half path exponentiates in half
precision: about 1e-3 nats)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._device import sm_count

MAX_K = 64          # larger k ranks with torch (StepBackend): K selection rounds per program
MIN_CHUNK = 1024
MAX_CHUNK = 8192    # one slice in registers: 8192 fp32 over 8 warps is 32 a thread
MAX_CANDIDATES = 8192  # chunks x K merged by one program in pass 2


@triton.jit
def _chunk_kernel(x_ptr, m_ptr, s_ptr, val_ptr, id_ptr, stride_row, V, chunks,
                  CHUNK: tl.constexpr, K: tl.constexpr, K_PAD: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    inside = cols < V
    x = tl.load(x_ptr + row * stride_row + cols, mask=inside, other=float("-inf")).to(tl.float32)
    x = tl.where(x == x, x, float("-inf"))  # NaN: -inf
    m = tl.max(x, 0)
    base = tl.where(m == float("-inf"), 0.0, m)  # a slice of -inf sums to 0, not NaN
    out = row * chunks + c
    tl.store(m_ptr + out, m)
    tl.store(s_ptr + out, tl.sum(tl.exp(x - base), 0))
    if K > 0:
        slot = tl.arange(0, K_PAD)
        vals = tl.full([K_PAD], float("-inf"), tl.float32)
        ids = tl.full([K_PAD], -1, tl.int32)
        free = inside
        for j in range(K):
            best = tl.max(tl.where(free, x, float("-inf")), 0)
            pick = tl.min(tl.where(free & (x == best), cols, 2147483647), 0)
            found = pick != 2147483647  # a slice shorter than K runs out of columns
            vals = tl.where(slot == j, tl.where(found, best, float("-inf")), vals)
            ids = tl.where(slot == j, tl.where(found, pick, -1), ids)
            free = free & (cols != pick)
        tl.store(val_ptr + out * K + slot, vals, mask=slot < K)
        tl.store(id_ptr + out * K + slot, ids, mask=slot < K)


@triton.jit
def _merge_kernel(m_ptr, s_ptr, val_ptr, id_ptr, out_val_ptr, out_id_ptr, x_ptr, tok_ptr, stride_row, V, chunks,
                  C_PAD: tl.constexpr, K: tl.constexpr, K_PAD: tl.constexpr, CAND_PAD: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, C_PAD)
    ok = c < chunks
    m = tl.load(m_ptr + row * chunks + c, mask=ok, other=float("-inf"))
    s = tl.load(s_ptr + row * chunks + c, mask=ok, other=0.0)
    top = tl.max(m, 0)
    base = tl.where(top == float("-inf"), 0.0, top)
    lse = base + tl.log(tl.sum(s * tl.exp(m - base), 0))  # log 0 = -inf for a row of -inf
    if K > 0:
        n = tl.arange(0, CAND_PAD)
        real = n < chunks * K
        vals = tl.load(val_ptr + row * chunks * K + n, mask=real, other=float("-inf"))
        ids = tl.load(id_ptr + row * chunks * K + n, mask=real, other=-1)
        key = tl.where(ids >= 0, ids, V + n)  # ties: real ids ascending, then the padding
        free = real
        slot = tl.arange(0, K_PAD)
        out_vals = tl.full([K_PAD], float("-inf"), tl.float32)
        out_ids = tl.full([K_PAD], 0, tl.int32)
        for j in range(K):
            best = tl.max(tl.where(free, vals, float("-inf")), 0)
            pick = tl.min(tl.where(free & (vals == best), key, 2147483647), 0)
            out_vals = tl.where(slot == j, best - lse, out_vals)
            out_ids = tl.where(slot == j, pick, out_ids)
            free = free & (key != pick)
        tl.store(out_val_ptr + row * K + slot, out_vals, mask=slot < K)
        tl.store(out_id_ptr + row * K + slot, out_ids.to(tl.int64), mask=slot < K)
    else:
        token = tl.load(tok_ptr + row)
        logit = tl.load(x_ptr + row * stride_row + token).to(tl.float32)
        logit = tl.where(logit == logit, logit, float("-inf"))
        tl.store(out_val_ptr + row, logit - lse)


def chunking(rows: int, vocab: int, k: int, device) -> tuple[int, int]:
    """(chunks, CHUNK): about four programs per SM, a power-of-two slice of MIN_CHUNK..MAX_CHUNK
    columns (never much wider than the row), and at most MAX_CANDIDATES candidates per row."""
    want = max(1, triton.cdiv(4 * sm_count(device), max(rows, 1)))
    chunk = triton.next_power_of_2(triton.cdiv(vocab, want))
    chunk = min(max(MIN_CHUNK, min(MAX_CHUNK, chunk)), triton.next_power_of_2(vocab))
    while k and triton.cdiv(vocab, chunk) * k > MAX_CANDIDATES and chunk < MAX_CHUNK:
        chunk *= 2
    return triton.cdiv(vocab, chunk), chunk


def fits(vocab: int, k: int) -> bool:
    """Whether these kernels rank k of vocab (else the caller ranks with torch)."""
    return 1 <= k <= min(MAX_K, vocab) and triton.cdiv(vocab, MAX_CHUNK) * k <= MAX_CANDIDATES


def chunk_warps(chunk: int) -> int:
    """Pass 1's warps for a slice of `chunk` columns (the rule; bench/ranking_sweep.py times others)."""
    return 8 if chunk >= 4096 else 4


def _run(logits: torch.Tensor, k: int, token: torch.Tensor | None, chunk: int | None = None,
         num_warps: int | None = None):
    """The two launches; chunk and num_warps (pass 1's) default to `chunking`'s and `chunk_warps`'s
    (bench/ranking_sweep.py times others; any power-of-two chunk of at most MAX_CHUNK ranks the same)."""
    vocab = logits.shape[-1]
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    x = logits.reshape(-1, vocab)
    rows = x.shape[0]
    if chunk is None:
        chunks, chunk = chunking(rows, vocab, k, logits.device)
    else:
        chunks = triton.cdiv(vocab, chunk)
    num_warps = num_warps or chunk_warps(chunk)
    f32 = dict(dtype=torch.float32, device=logits.device)
    m, s = torch.empty(rows, chunks, **f32), torch.empty(rows, chunks, **f32)
    vals = torch.empty(rows, chunks * max(k, 1), **f32)
    ids = torch.empty(rows, chunks * max(k, 1), dtype=torch.int32, device=logits.device)
    out_vals = torch.empty(rows, max(k, 1), **f32)
    out_ids = torch.empty(rows, max(k, 1), dtype=torch.int64, device=logits.device)
    tok = token.reshape(-1) if token is not None else out_ids
    k_pad = triton.next_power_of_2(max(k, 1))
    if rows:
        _chunk_kernel[(rows, chunks)](x, m, s, vals, ids, x.stride(0), vocab, chunks, CHUNK=chunk, K=k, K_PAD=k_pad,
                                      num_warps=num_warps)
        _merge_kernel[(rows,)](m, s, vals, ids, out_vals, out_ids, x, tok, x.stride(0), vocab, chunks,
                               C_PAD=triton.next_power_of_2(chunks), K=k, K_PAD=k_pad,
                               CAND_PAD=triton.next_power_of_2(chunks * max(k, 1)), num_warps=4)
    return out_vals, out_ids


def top_log_probs(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [..., V] -> (log-probabilities [..., k] float32, token ids [..., k] int64), largest
    first (fits(V, k) must hold)."""
    if not fits(logits.shape[-1], k):
        raise ValueError(f"the ranking kernels rank 1..{MAX_K} of a vocabulary; got k={k} of {logits.shape[-1]}")
    vals, ids = _run(logits, k, None)
    lead = logits.shape[:-1]
    return vals.reshape(*lead, k), ids.reshape(*lead, k)


def log_prob_of(logits: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    """logits [..., V], token [...] (int) -> each row's float32 log-probability of its token."""
    vals, _ = _run(logits, 0, token.to(torch.int64).contiguous())
    return vals.reshape(logits.shape[:-1])
