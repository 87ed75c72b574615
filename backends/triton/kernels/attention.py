"""Attention of T new tokens over a KV cache: decode (T = 1), chain and tree verify (T <= 128).

Contract (KERNEL_CONTRACTS.md): the new tokens' k/v are already in the cache at slots
lens[b] + u. Query t of request b sees every cache position < lens[b] and new position
lens[b] + u where tree_mask[b, t, u] (u <= t without a mask; u == t always). GQA: query head h
reads kv head h // (H // KH). fp32 scores, online softmax and P@V accumulation; P is rounded to
the cache dtype for the P@V tensor-core product (as FlashAttention does).

Parallelism (flash-decoding): the rows of one program are the T x G queries that share a kv
head (G = H // KH), so each K/V tile is loaded once for all of them. The KV range of each
request is cut into num_splits chunks (a multiple of BLOCK_N long, sized from lens on the
device); grid = (row blocks, B * KH, num_splits). With more than one split, a second kernel
merges the per-split (output, log-sum-exp) pairs. The grid depends only on shapes, never on
lens, so the pair is CUDA-graph safe; chunks that fall past a request's length do nothing.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._device import sm_count
from ._numerics import dot_f32acc, round_to

LOG2E = 1.4426950408889634
MAX_SPLITS = 64


@triton.jit
def _split_bounds(lens_ptr, offsets_ptr, b, T, max_seq, split, num_splits, min_chunk,
                  BLOCK_N: tl.constexpr, HAS_OFFSETS: tl.constexpr):
    """(prefix length, offset, kv length, chunk length, chunk start, chunk end) of split `split`
    of request b. Keys are rows 0 .. lens + offset + T - 1 (clipped to max_seq)."""
    prefix = tl.load(lens_ptr + b).to(tl.int32)
    offset = 0
    if HAS_OFFSETS:
        offset = tl.load(offsets_ptr + b).to(tl.int32)
    kv_len = tl.minimum(prefix + offset + T, max_seq)
    chunk = tl.maximum(tl.cdiv(tl.cdiv(kv_len, num_splits), BLOCK_N) * BLOCK_N, min_chunk)
    start = split * chunk
    end = tl.minimum(start + chunk, kv_len)
    return prefix, offset, kv_len, chunk, start, end


@triton.jit
def _attention_partial_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, lens_ptr, mask_ptr, out_ptr, o_part_ptr, lse_part_ptr,
    slots_ptr, offsets_ptr,
    stride_qb, stride_qt, stride_qh,
    stride_cb, stride_ch, stride_cs,
    stride_mb, stride_mt, stride_mu,
    stride_ob, stride_ot, stride_oh,
    T, U, max_seq, qk_scale_log2, num_splits, min_chunk,
    KH: tl.constexpr, G: tl.constexpr, D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    SPLIT: tl.constexpr, HAS_TREE_MASK: tl.constexpr, HAS_SLOTS: tl.constexpr, HAS_OFFSETS: tl.constexpr,
):
    pid_m = tl.program_id(0)
    b = tl.program_id(1) // KH
    kh = tl.program_id(1) % KH
    split = tl.program_id(2)
    prefix, offset, kv_len, chunk, start, end = _split_bounds(lens_ptr, offsets_ptr, b, T, max_seq, split,
                                                              num_splits, min_chunk, BLOCK_N, HAS_OFFSETS)

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    t = rows // G
    head = kh * G + rows % G
    row_ok = t < T
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + t[:, None] * stride_qt + head[:, None] * stride_qh + d[None, :],
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)

    cache_b = b.to(tl.int64)
    if HAS_SLOTS:
        cache_b = tl.load(slots_ptr + b).to(tl.int64)
    cache_base = cache_b * stride_cb + kh.to(tl.int64) * stride_ch
    k_base = k_cache_ptr + cache_base
    v_base = v_cache_ptr + cache_base
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    cols = tl.arange(0, BLOCK_N)

    # 1) blocks wholly inside the committed prefix: every key visible to every query, no masks
    prefix_end = tl.minimum(end, (prefix // BLOCK_N) * BLOCK_N)
    for n0 in range(start, prefix_end, BLOCK_N):
        kpos = n0 + cols
        k_t = tl.load(k_base + kpos[None, :] * stride_cs + d[:, None], mask=d_ok[:, None], other=0.0)
        s = dot_f32acc(q, k_t) * qk_scale_log2
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + kpos[:, None] * stride_cs + d[None, :], mask=d_ok[None, :], other=0.0)
        acc = acc * alpha[:, None] + dot_f32acc(p.to(v.dtype), v)
        m_i = m_new

    # 2) the rest of the chunk: prefix tail, the new tokens (tree / causal mask), the chunk end
    for n0 in range(tl.maximum(start, prefix_end), end, BLOCK_N):
        kpos = n0 + cols
        key_ok = kpos < end
        u = kpos - prefix                      # column of the new / scratch rows
        diagonal = offset + t                  # the query's own row
        if HAS_TREE_MASK:
            new_ok = tl.load(mask_ptr + b.to(tl.int64) * stride_mb + t[:, None] * stride_mt + u[None, :] * stride_mu,
                             mask=row_ok[:, None] & ((u >= 0) & (u < U))[None, :], other=0) != 0
            new_ok = new_ok | (u[None, :] == diagonal[:, None])
        else:
            new_ok = u[None, :] <= diagonal[:, None]
        visible = key_ok[None, :] & ((u < 0)[None, :] | new_ok)
        k_t = tl.load(k_base + kpos[None, :] * stride_cs + d[:, None], mask=key_ok[None, :] & d_ok[:, None], other=0.0)
        s = tl.where(visible, dot_f32acc(q, k_t) * qk_scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + kpos[:, None] * stride_cs + d[None, :], mask=key_ok[:, None] & d_ok[None, :], other=0.0)
        acc = acc * alpha[:, None] + dot_f32acc(p.to(v.dtype), v)
        m_i = m_new

    has_keys = l_i > 0.0
    result = acc / tl.where(has_keys, l_i, 1.0)[:, None]
    if not SPLIT:
        o_ptrs = out_ptr + b.to(tl.int64) * stride_ob + t[:, None] * stride_ot + head[:, None] * stride_oh + d[None, :]
        tl.store(o_ptrs, round_to(result, out_ptr.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])
    else:
        part = ((b.to(tl.int64) * T + t) * (KH * G) + head) * num_splits + split      # [BLOCK_M]
        active = row_ok & (start < kv_len)
        tl.store(o_part_ptr + part[:, None] * D + d[None, :], result, mask=active[:, None] & d_ok[None, :])
        lse = tl.where(has_keys, m_i + tl.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
        tl.store(lse_part_ptr + part, lse, mask=active)


@triton.jit
def _attention_combine_kernel(
    o_part_ptr, lse_part_ptr, lens_ptr, offsets_ptr, out_ptr,
    stride_ob, stride_ot, stride_oh,
    T, max_seq, num_splits, min_chunk,
    H: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr, HAS_OFFSETS: tl.constexpr,
):
    """One program per (request, token): merge the active splits of all its heads."""
    bt = tl.program_id(0).to(tl.int64)
    b = bt // T
    t = bt % T
    _, _, kv_len, chunk, _, _ = _split_bounds(lens_ptr, offsets_ptr, b, T, max_seq, 0, num_splits,
                                              min_chunk, BLOCK_N, HAS_OFFSETS)
    n_active = tl.cdiv(kv_len, chunk)
    heads = tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    ok = (heads < H)[:, None] & (d < D)[None, :]
    part = (bt * H + heads) * num_splits                                   # [BLOCK_H]
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
    for s in range(0, n_active):
        lse = tl.load(lse_part_ptr + part + s, mask=heads < H, other=float("-inf"))
        o = tl.load(o_part_ptr + (part + s)[:, None] * D + d[None, :], mask=ok, other=0.0)
        m_new = tl.maximum(m, lse)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - m_safe)
        w = tl.exp2(lse - m_safe)
        acc = acc * alpha[:, None] + w[:, None] * o
        l = l * alpha + w
        m = m_new
    result = acc / tl.where(l > 0.0, l, 1.0)[:, None]
    o_ptrs = out_ptr + b * stride_ob + t * stride_ot + heads[:, None] * stride_oh + d[None, :]
    tl.store(o_ptrs, round_to(result, out_ptr.dtype.element_ty), mask=ok)


def attention_config(B, T, H, KH, D, max_seq, device, num_splits=None, block_m=None, block_n=None,
                     num_warps=None, num_stages=None, min_chunk=None):
    """Launch parameters chosen from shapes only (never from lens): a dict the wrapper uses.

    Row blocks hold T*G queries of one kv head. A split covers at least `min_chunk` keys
    (default 4*T*G rounded up to BLOCK_N: the fp32 partials of a split, T*G*(D+1)*4 bytes per
    kv head, then cost at most about half of the K/V bytes it reads); the split count fills the
    GPU about four programs deep per SM, capped by the cache length and MAX_SPLITS."""
    G = H // KH
    rows = T * G
    if block_m is None:
        block_m = 16 if rows <= 16 else (32 if rows <= 32 else 64)
    if num_warps is None:
        num_warps = 8 if block_m >= 64 else 4
    block_n = block_n or 64
    m_blocks = triton.cdiv(rows, block_m)
    if min_chunk is None:
        min_chunk = 4 * rows
    min_chunk = triton.cdiv(max(min_chunk, block_n), block_n) * block_n
    if num_splits is None:
        wanted = triton.cdiv(4 * sm_count(device), B * KH * m_blocks)
        num_splits = max(1, min(wanted, triton.cdiv(max_seq, min_chunk), MAX_SPLITS))
    return dict(block_m=block_m, block_n=block_n, num_splits=num_splits, m_blocks=m_blocks, min_chunk=min_chunk,
                num_warps=num_warps, num_stages=num_stages or 2)


def attention_workspace(B, T, H, D, num_splits, device) -> torch.Tensor:
    """fp32 scratch for the split-KV partials (reuse it across layers and steps)."""
    return torch.empty(B * T * H * num_splits * (D + 1), dtype=torch.float32, device=device)


def attention(q, k_cache, v_cache, lens, tree_mask=None, scale=None, *, out=None, workspace=None,
              slots=None, offsets=None, **config):
    """q [B, T, H, D]; k_cache, v_cache [slots, KH, max_seq, D]; lens [B] int; tree_mask
    [B, T, U >= T] bool or None (causal). Returns out [B, T, H, D] in q.dtype.

    Query t of request b (cache slot slots[b], default b) sees rows < lens[b] and row
    lens[b] + u for u < offsets[b] + T (offsets default 0) where tree_mask[b, t, u], or
    u <= offsets[b] + t without a mask; its own row u = offsets[b] + t always. Rows
    lens[b] .. lens[b] + offsets[b] - 1 are scratch rows written by earlier forwards.

    `config` overrides launch parameters (num_splits, block_m, block_n, num_warps, num_stages,
    min_chunk);
    see attention_config. `workspace` (attention_workspace(...)) avoids an allocation when
    num_splits > 1."""
    B, T, H, D = q.shape
    _, KH, max_seq, Dk = k_cache.shape
    if Dk != D or H % KH or v_cache.shape != k_cache.shape or k_cache.stride() != v_cache.stride():
        raise ValueError(f"bad shapes q {tuple(q.shape)} k_cache {tuple(k_cache.shape)} v_cache {tuple(v_cache.shape)}")
    if D < 16:
        raise ValueError("head_dim must be >= 16 (tl.dot tile minimum)")
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1:
        raise ValueError("head_dim must be contiguous")
    if k_cache.dtype != q.dtype:
        raise ValueError(f"q dtype {q.dtype} != cache dtype {k_cache.dtype}")
    scale = D ** -0.5 if scale is None else float(scale)
    out = torch.empty_like(q) if out is None else out
    if out.stride(-1) != 1:
        raise ValueError("out's head_dim must be contiguous")
    if B * T == 0:
        return out
    cfg = attention_config(B, T, H, KH, D, max_seq, q.device, **config)
    splits = cfg["num_splits"]
    if tree_mask is not None:
        if tree_mask.dim() != 3 or tree_mask.shape[:2] != (B, T) or tree_mask.shape[2] < T:
            raise ValueError(f"tree_mask shape {tuple(tree_mask.shape)} is not [{B}, {T}, U >= {T}]")
        mask = tree_mask.view(torch.uint8) if tree_mask.dtype == torch.bool else tree_mask
        mask_strides = mask.stride()
    else:
        mask, mask_strides = lens, (0, 0, 0)
    if splits > 1:
        need = B * T * H * splits * (D + 1)
        if workspace is None:
            workspace = torch.empty(need, dtype=torch.float32, device=q.device)
        elif workspace.dtype != torch.float32 or workspace.numel() < need:
            raise ValueError(f"workspace must be fp32 with >= {need} elements")
        o_part, lse_part = workspace[: B * T * H * splits * D], workspace[B * T * H * splits * D: need]
    else:
        o_part = lse_part = out
    grid = (cfg["m_blocks"], B * KH, splits)
    _attention_partial_kernel[grid](
        q, k_cache, v_cache, lens, mask, out, o_part, lse_part,
        lens if slots is None else slots, lens if offsets is None else offsets,
        q.stride(0), q.stride(1), q.stride(2),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        *mask_strides,
        out.stride(0), out.stride(1), out.stride(2),
        T, T if tree_mask is None else tree_mask.shape[2], max_seq, scale * LOG2E, splits, cfg["min_chunk"],
        KH=KH, G=H // KH, D=D,
        BLOCK_M=cfg["block_m"], BLOCK_N=cfg["block_n"], BLOCK_D=triton.next_power_of_2(D),
        SPLIT=splits > 1, HAS_TREE_MASK=tree_mask is not None,
        HAS_SLOTS=slots is not None, HAS_OFFSETS=offsets is not None,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    if splits > 1:
        _attention_combine_kernel[(B * T,)](
            o_part, lse_part, lens, lens if offsets is None else offsets, out,
            out.stride(0), out.stride(1), out.stride(2),
            T, max_seq, splits, cfg["min_chunk"],
            H=H, D=D, BLOCK_H=triton.next_power_of_2(H), BLOCK_D=triton.next_power_of_2(D),
            BLOCK_N=cfg["block_n"], HAS_OFFSETS=offsets is not None, num_warps=4,
        )
    return out
