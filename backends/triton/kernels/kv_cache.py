"""KV-cache writes and the post-acceptance compaction (KERNEL_CONTRACTS.md, "KV cache").

Cache layout per layer: k_cache, v_cache [slots, kv_heads, max_seq, head_dim] (kv_compact also takes
the layers of one shape stacked, [layers, slots, kv_heads, max_seq, head_dim]: one launch); lens [B] int32
committed tokens of each request; request b lives in cache slot slots[b] (default: slot b). Neither kernel reads lens-dependent sizes on the host, so both are
CUDA-graph safe: the grids depend only on tensor shapes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

COMPACT_BLOCK = 512


@triton.jit
def cache_row(n, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_cb, stride_cs, T, max_seq,
              HAS_SLOTS: tl.constexpr, HAS_OFFSETS: tl.constexpr, HAS_N_ROWS: tl.constexpr):
    """(offset of token n's cache row in a cache, whether it is written): the row rule of kv_write and
    rope_kv_write (token t = n % T of request b = n // T: row lens[b] + offsets[b] + t of slot slots[b]; none
    past max_seq, nor with n_rows for pad rows n >= n_rows[0])."""
    b = n // T
    row = tl.load(lens_ptr + b).to(tl.int64) + n % T
    if HAS_OFFSETS:
        row += tl.load(offsets_ptr + b).to(tl.int64)
    cache_b = b
    if HAS_SLOTS:
        cache_b = tl.load(slots_ptr + b).to(tl.int64)
    in_cache = row < max_seq
    if HAS_N_ROWS:  # a packed forward's pad rows (n >= its real rows) write nothing
        in_cache = in_cache & (n < tl.load(n_rows_ptr))
    return cache_b * stride_cb + row * stride_cs, in_cache


@triton.jit
def _kv_write_kernel(k_new_ptr, v_new_ptr, k_cache_ptr, v_cache_ptr, lens_ptr, n_new_ptr, slots_ptr, offsets_ptr,
                     n_rows_ptr,
                     stride_kn, stride_kh, stride_vn, stride_vh, stride_cb, stride_ch, stride_cs,
                     T, max_seq,
                     KH: tl.constexpr, D: tl.constexpr, BLOCK_KH: tl.constexpr, BLOCK_D: tl.constexpr,
                     HAS_N_NEW: tl.constexpr, HAS_SLOTS: tl.constexpr, HAS_OFFSETS: tl.constexpr,
                     HAS_N_ROWS: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    row_at, write = cache_row(n, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_cb, stride_cs, T, max_seq,
                              HAS_SLOTS, HAS_OFFSETS, HAS_N_ROWS)
    if HAS_N_NEW:
        write = write & (n % T < tl.load(n_new_ptr + n // T))
    heads = tl.arange(0, BLOCK_KH)[:, None]
    cols = tl.arange(0, BLOCK_D)[None, :]
    ok = (heads < KH) & (cols < D)
    dst = row_at + heads * stride_ch + cols
    ok = tl.where(write, ok, False)  # not `ok & write`: Triton 3.9's interpreter mistypes tensor & scalar
    k = tl.load(k_new_ptr + n * stride_kn + heads * stride_kh + cols, mask=ok, other=0.0)
    v = tl.load(v_new_ptr + n * stride_vn + heads * stride_vh + cols, mask=ok, other=0.0)
    tl.store(k_cache_ptr + dst, k.to(k_cache_ptr.dtype.element_ty), mask=ok)
    tl.store(v_cache_ptr + dst, v.to(v_cache_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _kv_compact_kernel(k_cache_ptr, v_cache_ptr, lens_ptr, acc_idx_ptr, n_acc_ptr, new_lens_ptr, slots_ptr,
                       stride_cl, stride_cb, stride_ch, stride_cs, stride_acc, max_seq,
                       D: tl.constexpr, KH_D: tl.constexpr, BLOCK: tl.constexpr,
                       WRITE_LENS: tl.constexpr, HAS_SLOTS: tl.constexpr):
    """Program (b, chunk, layer) moves elements [chunk*BLOCK, +BLOCK) of the flattened (kv_head, d)
    row of every accepted slot of one layer, in ascending j. Because acc_idx ascends and acc_idx[j] >= j,
    a slot written at step j is never read at a later step, so the in-place move is race-free."""
    b = tl.program_id(0).to(tl.int64)
    layer = tl.program_id(2).to(tl.int64)
    e = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = e < KH_D
    cache_b = b
    if HAS_SLOTS:
        cache_b = tl.load(slots_ptr + b).to(tl.int64)
    row = layer * stride_cl + cache_b * stride_cb + (e // D) * stride_ch + e % D
    base = tl.load(lens_ptr + b).to(tl.int64)
    n_acc = tl.load(n_acc_ptr + b)
    for j in range(0, n_acc):
        src = base + tl.load(acc_idx_ptr + b * stride_acc + j).to(tl.int64)
        dst = base + j
        move = tl.where((src != dst) & (src < max_seq), ok, False)
        k = tl.load(k_cache_ptr + row + src * stride_cs, mask=move)
        v = tl.load(v_cache_ptr + row + src * stride_cs, mask=move)
        tl.store(k_cache_ptr + row + dst * stride_cs, k, mask=move)
        tl.store(v_cache_ptr + row + dst * stride_cs, v, mask=move)
    if WRITE_LENS:
        if (tl.program_id(1) == 0) & (tl.program_id(2) == 0):
            tl.store(new_lens_ptr + b, (base + n_acc).to(new_lens_ptr.dtype.element_ty))


def _check_caches(k_cache, v_cache):
    if k_cache.shape != v_cache.shape or k_cache.stride() != v_cache.stride() or k_cache.stride(-1) != 1:
        raise ValueError("k_cache and v_cache need the same shape, strides and a contiguous head_dim")


def kv_write(k_cache, v_cache, k_new, v_new, lens, n_new=None, *, slots=None, offsets=None, n_rows=None):
    """Write k_new/v_new [B, T, KH, D] of token t of request b to row lens[b] + offsets[b] + t of
    cache slot slots[b], in place (offsets default 0: the contract's slot lens[b] + t; slots
    default b). With n_new [B], only t < n_new[b] is written; with n_rows (a one-element int
    tensor on the device: a packed forward's real rows, ForwardInputs.row_start[-1:]) only tokens
    b * T + t < n_rows[0] (the pad rows past it are not). Rows >= max_seq are never written."""
    _check_caches(k_cache, v_cache)
    B, T, KH, D = k_new.shape
    if v_new.shape != k_new.shape or k_new.stride(-1) != 1 or v_new.stride(-1) != 1:
        raise ValueError("k_new, v_new must be equal-shaped [B, T, KH, D] with a contiguous last dim")
    k3, v3 = k_new.view(B * T, KH, D), v_new.view(B * T, KH, D)
    if B * T == 0:
        return
    _kv_write_kernel[(B * T,)](
        k3, v3, k_cache, v_cache, lens, lens if n_new is None else n_new,
        lens if slots is None else slots, lens if offsets is None else offsets, lens if n_rows is None else n_rows,
        k3.stride(0), k3.stride(1), v3.stride(0), v3.stride(1), *k_cache.stride()[:3],
        T, k_cache.shape[2],
        KH=KH, D=D, BLOCK_KH=triton.next_power_of_2(KH), BLOCK_D=triton.next_power_of_2(D),
        HAS_N_NEW=n_new is not None, HAS_SLOTS=slots is not None, HAS_OFFSETS=offsets is not None,
        HAS_N_ROWS=n_rows is not None, num_warps=4)


def kv_compact(k_cache, v_cache, lens, acc_idx, n_acc, new_lens_out=None, *, slots=None):
    """Move row lens[b] + acc_idx[b, j] to row lens[b] + j for j < n_acc[b], in place, in cache
    slot slots[b] (default b); caches [slots, KH, S, D] (one layer) or [L, slots, KH, S, D] (L
    layers of one shape, one launch).

    acc_idx [B, T] must ascend within 0 .. n_acc[b]-1 (as greedy acceptance gives). `lens` is
    read, not changed; pass `new_lens_out` (a different tensor) to get lens + n_acc in the
    same launch."""
    _check_caches(k_cache, v_cache)
    if k_cache.dim() == 4:
        k_cache, v_cache = k_cache[None], v_cache[None]
    L, _, KH, max_seq, D = k_cache.shape
    B = lens.shape[0]
    if acc_idx.stride(-1) != 1:
        raise ValueError("acc_idx needs a contiguous last dim")
    if new_lens_out is not None and new_lens_out.data_ptr() == lens.data_ptr():
        raise ValueError("new_lens_out must not alias lens (other programs still read lens)")
    block = min(COMPACT_BLOCK, triton.next_power_of_2(KH * D))
    _kv_compact_kernel[(B, triton.cdiv(KH * D, block), L)](
        k_cache, v_cache, lens, acc_idx, n_acc, lens if new_lens_out is None else new_lens_out,
        lens if slots is None else slots,
        *k_cache.stride()[:4], acc_idx.stride(0), max_seq,
        D=D, KH_D=KH * D, BLOCK=block, WRITE_LENS=new_lens_out is not None, HAS_SLOTS=slots is not None,
        num_warps=4)
