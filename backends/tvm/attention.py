"""Attention of T new query tokens per request over the KV cache (decode, chain verify, tree
verify and prefill are the same kernel), with ragged lengths, GQA and an optional tree mask.

Contract (KERNEL_CONTRACTS.md): q [B, T, H, D]; caches [slots, KH, max_seq, D] already holding
the T new tokens at positions lens[b] + u. Query t of request b attends to cache positions
0 .. lens[b]-1 and to new position lens[b] + u when tree_mask[b, t, u] (u <= t without a mask;
u == t always). Query head h reads kv head h // (H // KH). Scores are fp32 dots times `scale`,
softmax in fp32, P @ V in fp32, one rounding to the activation dtype on store.

Kernel shape: one parallel task per (request, kv head, chunk of `tq` query tokens). A task
handles the chunk's `tq * G` query rows that share its kv head (G = H / KH), so each K and V
row it loads serves all of them. Three passes over the visible positions: scores (one fp32
vector accumulator per row, reduced once per position; masked positions get -inf), then
max / exp / sum per row (vectorised, polynomial exp), then P @ V (vectorised along D, positions
with zero weight skipped so unwritten cache slots never leak in), divided by the row sum. The
scores live in a per-task fp32 scratch row of max_seq entries. Exact softmax, not online: the
scratch is small on a CPU (R * max_seq * 4 bytes in L2) and the result follows the reference.

Symbolic: batch, T, slots, max_seq. A kernel is compiled per (H, KH, D, dtype, masked?) and
per chunk size (tq = 1 for decode, 8 / G query tokens otherwise).
"""

from __future__ import annotations

import torch

_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}


def build_attention(heads: int, kv_heads: int, head_dim: int, act: str, masked: bool, tq: int, lanes: int):
    """PrimFunc `(q[B, T, H, D], k_cache, v_cache [S, KH, MS, D], lens[B] int32,
    [mask[B, T, T] uint8], out[B, T, H, D], scale)`."""
    from tvm.script import tirx as T

    from .numerics import exp_f32

    group = heads // kv_heads
    rows = tq * group
    d_blocks = head_dim // lanes
    neg_inf = float("-inf")

    def f32(e):
        return T.Cast("float32", e)

    def visible_new(mask, b, t, u):
        """May query t see new token u (both within the request's T new tokens)?"""
        if masked:
            return T.Or(mask[b, t, u] != T.uint8(0), u == t)
        return u <= t

    @T.prim_func
    def attention(var_q: T.handle, var_k: T.handle, var_v: T.handle, var_lens: T.handle,
                  var_mask: T.handle, var_out: T.handle, scale: T.float32):
        T.func_attr({"tirx.noalias": True})
        batch = T.int64()
        n_new = T.int64()
        slots = T.int64()
        max_seq = T.int64()
        q = T.match_buffer(var_q, (batch, n_new, heads, head_dim), act)
        k_cache = T.match_buffer(var_k, (slots, kv_heads, max_seq, head_dim), act)
        v_cache = T.match_buffer(var_v, (slots, kv_heads, max_seq, head_dim), act)
        lens = T.match_buffer(var_lens, (batch,), "int32")
        mask = T.match_buffer(var_mask, (batch, n_new, n_new) if masked else (1,), "uint8")
        out = T.match_buffer(var_out, (batch, n_new, heads, head_dim), act)
        n_chunks = (n_new + tq - 1) // tq
        for task in T.parallel(batch * kv_heads * n_chunks):
            b = task // (kv_heads * n_chunks)
            kvh = task // n_chunks % kv_heads
            t0 = task % n_chunks * tq
            ctx_len = T.Cast("int64", lens[b])
            # the last position any query of this chunk may see (masks: any new token)
            n_pos = ctx_len + (n_new if masked else T.min(n_new, t0 + tq))
            scores = T.alloc_buffer((rows, max_seq + lanes), "float32")
            acc = T.alloc_buffer((rows, lanes), "float32", scope="local")
            stat = T.alloc_buffer((rows, 2), "float32", scope="local")  # row max, row sum
            vec = T.alloc_buffer((lanes,), "float32", scope="local")
            half4 = T.alloc_buffer((lanes // 2,), "float32", scope="local")
            half2 = T.alloc_buffer((lanes // 4,), "float32", scope="local")
            o = T.alloc_buffer((head_dim,), "float32", scope="local")
            # pass 1: scores[r, p] = scale * q_r . k_p, or -inf where masked
            for p in range(n_pos):
                for r in T.unroll(rows):
                    for lane in T.vectorized(lanes):
                        acc[r, lane] = T.float32(0)
                    for db in range(d_blocks):
                        for lane in T.vectorized(lanes):
                            acc[r, lane] = acc[r, lane] + f32(
                                q[b, T.min(t0 + r // group, n_new - 1), kvh * group + r % group, db * lanes + lane]
                            ) * f32(k_cache[b, kvh, p, db * lanes + lane])
                    # lane sum as a tree of vector halves (a serial sum is 3x slower)
                    for lane in T.vectorized(lanes // 2):
                        half4[lane] = acc[r, lane] + acc[r, lanes // 2 + lane]
                    for lane in T.vectorized(lanes // 4):
                        half2[lane] = half4[lane] + half4[lanes // 4 + lane]
                    scores[r, p] = T.float32(0)
                    for lane in range(lanes // 4):
                        scores[r, p] = scores[r, p] + half2[lane]
                    if p >= ctx_len and not visible_new(mask, b, T.min(t0 + r // group, n_new - 1), p - ctx_len):
                        scores[r, p] = T.float32(neg_inf)
                    else:
                        scores[r, p] = scores[r, p] * scale
            for r in range(rows):
                if t0 + r // group < n_new:
                    # pass 2: softmax weights (unnormalised) and their sum
                    for lane in T.vectorized(lanes):
                        vec[lane] = T.float32(neg_inf)
                    for pb in range((n_pos + lanes - 1) // lanes):
                        for lane in T.vectorized(lanes):
                            vec[lane] = T.max(vec[lane], T.if_then_else(
                                pb * lanes + lane < n_pos, scores[r, pb * lanes + lane], T.float32(neg_inf)))
                    stat[r, 0] = T.float32(neg_inf)
                    for lane in range(lanes):
                        stat[r, 0] = T.max(stat[r, 0], vec[lane])
                    for lane in T.vectorized(lanes):
                        vec[lane] = T.float32(0)
                    for pb in range((n_pos + lanes - 1) // lanes):
                        for lane in T.vectorized(lanes):
                            scores[r, pb * lanes + lane] = T.if_then_else(
                                pb * lanes + lane < n_pos, exp_f32(scores[r, pb * lanes + lane] - stat[r, 0]),
                                T.float32(0))
                            vec[lane] = vec[lane] + scores[r, pb * lanes + lane]
                    stat[r, 1] = T.float32(0)
                    for lane in range(lanes):
                        stat[r, 1] = stat[r, 1] + vec[lane]
                    # pass 3: o = sum_p w_p v_p / sum_p w_p
                    for d in T.vectorized(head_dim):
                        o[d] = T.float32(0)
                    for p in range(n_pos):
                        if scores[r, p] > T.float32(0):
                            for d in T.vectorized(head_dim):
                                o[d] = o[d] + scores[r, p] * f32(v_cache[b, kvh, p, d])
                    for d in T.vectorized(head_dim):
                        out[b, t0 + r // group, kvh * group + r % group, d] = T.Cast(act, o[d] / stat[r, 1])

    return attention


def attention(cache, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lens: torch.Tensor,
              tree_mask: torch.Tensor | None = None, scale: float | None = None, *,
              out: torch.Tensor | None = None) -> torch.Tensor:
    """Attention per the contract (see the module docstring). Returns out [B, T, H, D] in q's dtype.
    Requires lens[b] + T <= max_seq."""
    batch, n_new, heads, head_dim = q.shape
    kv_heads = k_cache.shape[1]
    if heads % kv_heads or k_cache.shape[-1] != head_dim or v_cache.shape != k_cache.shape:
        raise ValueError(f"attention: q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}")
    act = _DTYPES[q.dtype]
    group = heads // kv_heads
    tq = 1 if n_new == 1 else max(1, 8 // group)  # query tokens per task: rows = tq * group
    lanes = next((v for v in (cache.host.fp32_lanes, 8, 4) if head_dim % v == 0), None)
    if lanes is None:
        raise ValueError(f"attention: head_dim {head_dim} must be a multiple of 4")
    masked = tree_mask is not None
    params = {"heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "act": act, "masked": masked,
              "tq": tq, "lanes": lanes}
    fn = cache.get("attention", params,
                   lambda: build_attention(heads, kv_heads, head_dim, act, masked, tq, lanes))
    if masked:
        if tree_mask.shape != (batch, n_new, n_new):
            raise ValueError(f"attention: tree_mask {tuple(tree_mask.shape)} != {(batch, n_new, n_new)}")
        mask = tree_mask.view(torch.uint8) if tree_mask.dtype == torch.bool else tree_mask.to(torch.uint8)
        mask = mask.contiguous()
    else:
        mask = _NO_MASK  # the causal kernel takes a 1-element placeholder it never reads
    y = out if out is not None else torch.empty(q.shape, dtype=q.dtype)
    scale = head_dim ** -0.5 if scale is None else scale
    fn(q.contiguous(), k_cache, v_cache, lens.to(torch.int32).contiguous(), mask, y, float(scale))
    return y


_NO_MASK = torch.zeros(1, dtype=torch.uint8)
