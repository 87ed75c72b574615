"""KV-cache writes and the post-acceptance compaction, in torch (no TVM kernel).

Both are pure data movement (T * KH * D values per request, at slots chosen at runtime): torch's
advanced-index copy already moves them at memory speed in one call, and a TVM kernel would add
a compile and a cache entry without reading fewer bytes. They follow KERNEL_CONTRACTS.md and
work in place on `[slots, KH, max_seq, D]` caches of any dtype.
"""

from __future__ import annotations

import torch


def kv_write(k_cache: torch.Tensor, v_cache: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor,
             lens: torch.Tensor, n_new: torch.Tensor | None = None) -> None:
    """k/v of new token t of request b (`[B, T, KH, D]`) go to slot lens[b] + t, for t < n_new[b]
    when given; slots at or past max_seq are dropped."""
    batch, n_tok = k_new.shape[:2]
    max_seq = k_cache.shape[2]
    b_idx = torch.arange(batch).unsqueeze(1).expand(batch, n_tok)
    t_idx = torch.arange(n_tok).unsqueeze(0).expand(batch, n_tok)
    slot = lens.long().unsqueeze(1) + t_idx
    ok = slot < max_seq
    if n_new is not None:
        ok &= t_idx < n_new.long().unsqueeze(1)
    b_sel, s_sel = b_idx[ok], slot[ok]
    k_cache[b_sel, :, s_sel] = k_new[ok].to(k_cache.dtype)
    v_cache[b_sel, :, s_sel] = v_new[ok].to(v_cache.dtype)


def kv_compact(k_cache: torch.Tensor, v_cache: torch.Tensor, lens: torch.Tensor, acc_idx: torch.Tensor,
               n_acc: torch.Tensor) -> torch.Tensor:
    """Slot lens[b] + acc_idx[b, j] -> slot lens[b] + j for j < n_acc[b] (acc_idx ascending, so
    gathering every source before writing is safe). Returns lens + n_acc; `lens` is unchanged."""
    batch, width = acc_idx.shape
    j = torch.arange(width).unsqueeze(0).expand(batch, width)
    ok = j < n_acc.long().unsqueeze(1)
    ok &= acc_idx.long() != j  # a chain (acc = 0..n-1) moves nothing
    b_sel = torch.arange(batch).unsqueeze(1).expand(batch, width)[ok]
    base = lens.long().unsqueeze(1).expand(batch, width)[ok]
    src, dst = base + acc_idx.long()[ok], base + j[ok]
    if b_sel.numel():
        k_cache[b_sel, :, dst] = k_cache[b_sel, :, src]
        v_cache[b_sel, :, dst] = v_cache[b_sel, :, src]
    return lens + n_acc.to(lens.dtype)
