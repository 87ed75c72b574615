"""Attention of T new query tokens per request over the KV cache (decode, chain verify, tree
verify and prefill are the same kernel), with ragged lengths, GQA and an optional tree mask.

Contract (KERNEL_CONTRACTS.md): q [B, T, H, D]; caches [slots, KH, max_seq, D] already holding
the T new tokens at positions lens[b] + u. Query t of request b attends to cache positions
0 .. lens[b]-1 and to new position lens[b] + u when tree_mask[b, t, u] (u <= t without a mask;
u == t always). Query head h reads kv head h // (H // KH). Scores are fp32 dots times `scale`,
softmax in fp32, P @ V in fp32, one rounding to the activation dtype on store.
With the contract's optional cache slots and scratch rows: request b reads cache slot
`slots[b]` (default b); its new token t sits at row lens[b] + offsets[b] + t (offsets default 0);
the mask is [B, T, U] with column u = row lens[b] + u (U >= offsets[b] + T, columns past
offsets[b] + T ignored); without a mask the rule is u <= offsets[b] + t; a query's own row is
u = offsets[b] + t.

Kernel shape: one parallel task per (request, kv head, chunk of `tq` query tokens). A task
handles the chunk's `tq * G` query rows that share its kv head (G = H / KH), so each K and V
row it loads serves all of them. Three passes over the visible positions (0 .. lens[b] + the
chunk's last token; slots past lens[b] + T are never read):
1. scores, masked ones set to -inf. Decode (T = 1, G rows): per row and position one fp32
   vector accumulator along D, summed as a tree of halves. Verify/prefill (T > 1, 64 rows per
   task): "blocked" - each block of 16 K rows is transposed once, then a 4-row x 16-position
   register tile accumulates along D with broadcast FMAs (no horizontal sums).
2. per row: max, exp (polynomial, vectorised), sum.
3. P @ V along D with 8 vector accumulators per row, divided by the row sum.
Positions a query may not see get weight exactly 0, but they are still multiplied in (a branch
or select costs 2-3x here), so every slot below lens[b] + T must hold finite values: kv_write
fills them; a runtime that pads requests (n_new < T) must not leave NaN/inf in the padding
slots (allocate the cache with zeros). Exact softmax, not online: the per-task fp32 scratch
(rows x max_seq) stays in L2 and the result follows the reference.

Symbolic: batch, T, slots, max_seq, mask columns. A kernel is compiled per (H, KH, D, dtype,
masked?), per variant (decode, or blocked with 64 / G query tokens per task) and serial or
parallel (serial for one task, or when `host_target.set_threads(1)`).
"""

from __future__ import annotations

import torch

from .alignment import aligned
from .host_target import parallel_allowed

_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}


BLOCK_POS = 16  # positions per transposed K block (blocked scores)
BLOCK_ROWS = 4  # query rows per register block (blocked scores): 4 x 16 fp32 = 8 ymm accumulators
ROWS_PER_TASK = 64  # query rows per task (blocked scores): amortises the K transposition


def build_attention(heads: int, kv_heads: int, head_dim: int, act: str, masked: bool, tq: int, lanes: int,
                    blocked: bool, parallel: bool = True):
    """PrimFunc `(q[B, T, H, D], k_cache, v_cache [S, KH, MS, D], lens[B], slots[B], offsets[B]
    (int32), [mask[B, T, U] uint8], out[B, T, H, D], scale)`."""
    from tvm.script import tirx as T

    from .numerics import exp_f32

    group = heads // kv_heads
    rows = tq * group
    tasks_loop = T.parallel if parallel else T.serial
    pad = BLOCK_POS if blocked else lanes
    if blocked and rows % BLOCK_ROWS:
        raise ValueError(f"attention: blocked scores need rows ({rows}) divisible by {BLOCK_ROWS}")
    d_blocks = head_dim // lanes
    neg_inf = float("-inf")

    def f32(e):
        return T.Cast("float32", e)

    def visible_new(mask, b, off, t, u):
        """May query t see scratch row lens[b] + u (u < offsets[b] + T)?"""
        if masked:
            return T.Or(mask[b, t, u] != T.uint8(0), u == off + t)
        return u <= off + t

    @T.prim_func
    def attention(var_q: T.handle, var_k: T.handle, var_v: T.handle, var_lens: T.handle,
                  var_slots: T.handle, var_offsets: T.handle, var_mask: T.handle, var_out: T.handle,
                  scale: T.float32):
        T.func_attr({"tirx.noalias": True})
        batch = T.int64()
        n_new = T.int64()
        slots = T.int64()
        max_seq = T.int64()
        n_cols = T.int64()
        q = T.match_buffer(var_q, (batch, n_new, heads, head_dim), act)
        k_cache = T.match_buffer(var_k, (slots, kv_heads, max_seq, head_dim), act)
        v_cache = T.match_buffer(var_v, (slots, kv_heads, max_seq, head_dim), act)
        lens = T.match_buffer(var_lens, (batch,), "int32")
        slot_of = T.match_buffer(var_slots, (batch,), "int32")
        offsets = T.match_buffer(var_offsets, (batch,), "int32")
        mask = T.match_buffer(var_mask, (batch, n_new, n_cols) if masked else (1,), "uint8")
        out = T.match_buffer(var_out, (batch, n_new, heads, head_dim), act)
        n_chunks = (n_new + tq - 1) // tq
        for task in tasks_loop(batch * kv_heads * n_chunks):
            b = task // (kv_heads * n_chunks)
            kvh = task // n_chunks % kv_heads
            t0 = task % n_chunks * tq
            s = T.Cast("int64", slot_of[b])
            ctx_len = T.Cast("int64", lens[b])
            off = T.Cast("int64", offsets[b])
            # the last position any query of this chunk may see (masks: any new token)
            n_pos = ctx_len + off + (n_new if masked else T.min(n_new, t0 + tq))
            scores = T.alloc_buffer((rows, max_seq + pad), "float32")
            acc = T.alloc_buffer((rows, lanes), "float32", scope="local")
            stat = T.alloc_buffer((rows, 2), "float32", scope="local")  # row max, row sum
            vec = T.alloc_buffer((lanes,), "float32", scope="local")
            half4 = T.alloc_buffer((lanes // 2,), "float32", scope="local")
            half2 = T.alloc_buffer((lanes // 4,), "float32", scope="local")
            o = T.alloc_buffer((head_dim,), "float32", scope="local")
            k_t = T.alloc_buffer((head_dim, BLOCK_POS), "float32")
            acc_blk = T.alloc_buffer((BLOCK_ROWS, BLOCK_POS), "float32", scope="local")
            if blocked:
                # pass 1 (many rows): K block transposed once, then a [4 rows x 16 positions]
                # register tile per step along D: no horizontal sums
                for pb in range((n_pos + BLOCK_POS - 1) // BLOCK_POS):
                    for j in range(BLOCK_POS):
                        for d in range(head_dim):
                            k_t[d, j] = T.if_then_else(
                                pb * BLOCK_POS + j < n_pos,
                                f32(k_cache[s, kvh, T.min(pb * BLOCK_POS + j, max_seq - 1), d]), T.float32(0))
                    for rb in range(rows // BLOCK_ROWS):
                        for i in T.unroll(BLOCK_ROWS):
                            for j in T.vectorized(BLOCK_POS):
                                acc_blk[i, j] = T.float32(0)
                        for d in range(head_dim):
                            for i in T.unroll(BLOCK_ROWS):
                                for j in T.vectorized(BLOCK_POS):
                                    acc_blk[i, j] = acc_blk[i, j] + f32(q[
                                        b, T.min(t0 + (rb * BLOCK_ROWS + i) // group, n_new - 1),
                                        kvh * group + (rb * BLOCK_ROWS + i) % group, d]) * k_t[d, j]
                        for i in T.unroll(BLOCK_ROWS):
                            for j in T.vectorized(BLOCK_POS):
                                scores[rb * BLOCK_ROWS + i, pb * BLOCK_POS + j] = acc_blk[i, j] * scale
                for r in range(rows):
                    for u in range(n_pos - ctx_len):
                        if not visible_new(mask, b, off, T.min(t0 + r // group, n_new - 1), u):
                            scores[r, ctx_len + u] = T.float32(neg_inf)
            else:
                # pass 1 (few rows): scores[r, p] = scale * q_r . k_p, or -inf where masked
                for p in range(n_pos):
                    for r in T.unroll(rows):
                        for lane in T.vectorized(lanes):
                            acc[r, lane] = T.float32(0)
                        for db in range(d_blocks):
                            for lane in T.vectorized(lanes):
                                acc[r, lane] = acc[r, lane] + f32(
                                    q[b, T.min(t0 + r // group, n_new - 1), kvh * group + r % group, db * lanes + lane]
                                ) * f32(k_cache[s, kvh, p, db * lanes + lane])
                        # lane sum as a tree of vector halves (a serial sum is 3x slower)
                        for lane in T.vectorized(lanes // 2):
                            half4[lane] = acc[r, lane] + acc[r, lanes // 2 + lane]
                        for lane in T.vectorized(lanes // 4):
                            half2[lane] = half4[lane] + half4[lanes // 4 + lane]
                        scores[r, p] = T.float32(0)
                        for lane in range(lanes // 4):
                            scores[r, p] = scores[r, p] + half2[lane]
                        if p >= ctx_len and not visible_new(mask, b, off, T.min(t0 + r // group, n_new - 1),
                                                            p - ctx_len):
                            scores[r, p] = T.float32(neg_inf)
                        else:
                            scores[r, p] = scores[r, p] * scale
            for r in range(rows):
                if t0 + r // group < n_new:
                    # -inf past the last position up to a whole vector: passes 2 need no bound test
                    for j in range(lanes):
                        scores[r, n_pos + j] = T.float32(neg_inf)
                    # pass 2: softmax weights (unnormalised) and their sum
                    for lane in T.vectorized(lanes):
                        vec[lane] = T.float32(neg_inf)
                    for pb in range((n_pos + lanes - 1) // lanes):
                        for lane in T.vectorized(lanes):
                            vec[lane] = T.max(vec[lane], scores[r, pb * lanes + lane])
                    stat[r, 0] = T.float32(neg_inf)
                    for lane in range(lanes):
                        stat[r, 0] = T.max(stat[r, 0], vec[lane])
                    for lane in T.vectorized(lanes):
                        vec[lane] = T.float32(0)
                    for pb in range((n_pos + lanes - 1) // lanes):
                        for lane in T.vectorized(lanes):
                            scores[r, pb * lanes + lane] = exp_f32(scores[r, pb * lanes + lane] - stat[r, 0])
                            vec[lane] = vec[lane] + scores[r, pb * lanes + lane]
                    stat[r, 1] = T.float32(0)
                    for lane in range(lanes):
                        stat[r, 1] = stat[r, 1] + vec[lane]
                    # pass 3: o = sum_p w_p v_p / sum_p w_p
                    for d in T.vectorized(head_dim):
                        o[d] = T.float32(0)
                    for p in range(n_pos):  # no branch or select here: either costs 2-3x
                        for d in T.vectorized(head_dim):
                            o[d] = o[d] + scores[r, p] * f32(v_cache[s, kvh, p, d])
                    for d in T.vectorized(head_dim):
                        out[b, t0 + r // group, kvh * group + r % group, d] = T.Cast(act, o[d] / stat[r, 1])

    return attention


def attention(cache, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lens: torch.Tensor,
              tree_mask: torch.Tensor | None = None, scale: float | None = None, *,
              out: torch.Tensor | None = None, slots: torch.Tensor | None = None,
              offsets: torch.Tensor | None = None) -> torch.Tensor:
    """Attention per the contract (see the module docstring). Returns out [B, T, H, D] in q's dtype.
    `slots` / `offsets` ([B] ints) default to b / 0; `tree_mask` is [B, T, U] with
    U >= max(offsets) + T. Requires lens[b] + offsets[b] + T <= max_seq."""
    batch, n_new, heads, head_dim = q.shape
    lens32 = lens.to(torch.int32).contiguous()
    offs32 = _zeros(batch) if offsets is None else offsets.to(torch.int32).contiguous()
    slots32 = _arange(batch) if slots is None else slots.to(torch.int32).contiguous()
    widest = int((lens32 + offs32).max()) + n_new if offsets is not None else int(lens32.max()) + n_new
    if widest > k_cache.shape[2]:
        raise ValueError(f"attention: lens + offsets + T = {widest} > max_seq {k_cache.shape[2]}")
    kv_heads = k_cache.shape[1]
    if heads % kv_heads or k_cache.shape[-1] != head_dim or v_cache.shape != k_cache.shape:
        raise ValueError(f"attention: q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}")
    act = _DTYPES[q.dtype]
    group = heads // kv_heads
    # decode: one token per task, scores by per-row dots; more tokens: ~32 rows per task, blocked
    blocked = n_new > 1 and (max(1, ROWS_PER_TASK // group) * group) % BLOCK_ROWS == 0
    tq = max(1, ROWS_PER_TASK // group) if blocked else max(1, min(n_new, 8 // group))
    lanes = next((v for v in (cache.host.fp32_lanes, 8, 4) if head_dim % v == 0), None)
    if lanes is None:
        raise ValueError(f"attention: head_dim {head_dim} must be a multiple of 4")
    masked = tree_mask is not None
    parallel = parallel_allowed() and batch * kv_heads * -(-n_new // tq) > 1
    params = {"heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "act": act, "masked": masked,
              "tq": tq, "lanes": lanes, "blocked": blocked, "parallel": parallel}
    fn = cache.get("attention", params,
                   lambda: build_attention(heads, kv_heads, head_dim, act, masked, tq, lanes, blocked, parallel))
    if masked:
        width = n_new + (0 if offsets is None else int(offs32.max()))
        if tree_mask.dim() != 3 or tree_mask.shape[:2] != (batch, n_new) or tree_mask.shape[2] < width:
            raise ValueError(f"attention: tree_mask {tuple(tree_mask.shape)} is not [{batch}, {n_new}, >= {width}]")
        mask = tree_mask.view(torch.uint8) if tree_mask.dtype == torch.bool else tree_mask.to(torch.uint8)
        mask = mask.contiguous()
    else:
        mask = _NO_MASK  # the causal kernel takes a 1-element placeholder it never reads
    y = out if out is not None else torch.empty(q.shape, dtype=q.dtype)
    scale = head_dim ** -0.5 if scale is None else scale
    fn(aligned(q.contiguous()), aligned(k_cache), aligned(v_cache), lens32, slots32, offs32, mask, y, float(scale))
    return y


def _zeros(batch: int) -> torch.Tensor:
    return torch.zeros(batch, dtype=torch.int32)


def _arange(batch: int) -> torch.Tensor:
    return torch.arange(batch, dtype=torch.int32)


_NO_MASK = torch.zeros(1, dtype=torch.uint8)
