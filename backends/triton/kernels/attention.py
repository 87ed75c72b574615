"""Attention of T new tokens over a KV cache: decode (T = 1), chain and tree verify (T <= 128).

Contract (KERNEL_CONTRACTS.md): the new tokens' k/v are already in the cache at slots
lens[b] + u. Query t of request b sees every cache position < lens[b] and new position
lens[b] + u where tree_mask[b, t, u] (u <= t without a mask; u == t always). GQA: query head h
reads kv head h // (H // KH). fp32 scores, online softmax and P@V accumulation; P is rounded to
the cache dtype for the P@V tensor-core product (as FlashAttention does).

Parallelism (flash-decoding, one launch): the rows of one program are the T x G queries that
share a kv head (G = H // KH), so each K/V tile is loaded once for all of them. The KV range of
each request is cut into at most num_splits chunks, each a multiple of BLOCK_N long and sized on
the device from the request's actual length (lens), not from the cache capacity: at context 512
with 64-key chunks 9 splits work and the rest of the grid only reads lens and exits.
grid = (B * KH, row blocks, num_splits) depends only on shapes, never on lens, so the launch is
CUDA-graph safe (B * KH on axis 0, the only axis whose limit is not 65535: B can be large, e.g. a
packed forward run per row, 8192 one-token rows x 8 kv heads). When one
chunk covers the whole range its program writes the output directly.
Otherwise every active split stores its fp32 (output, log-sum-exp) partial, bumps a per-(row
block, request, kv head) arrival counter, and the last split to arrive merges the partials of
all active splits (a vectorised [rows, splits, D] reduction) and writes the output; it then
resets the counter to 0 (the counters start zeroed and are left zeroed: the same pattern as the
split-K linear kernels). There is no second (merge) launch.

Grouped (request-major) mode, for a packed forward (specir/step/ragged.py): q is [P, 1, H, D],
P one-token rows, and row_start [R + 1] says request r owns the contiguous rows row_start[r] ..
row_start[r + 1] - 1 (each row's lens, slots, offsets and mask row as in the per-row mode; lens
and slots equal on a request's rows). One program group per (request, kv head, split) covers all
of the request's rows (the T x G rows of a dense [B, T] launch, with T = U, the mask width, as the
row bound), so a request's KV is read once per (kv head, split, row block), not once per row (one
row block while the request's rows x G fit in BLOCK_M). Row p's own row is offsets[p]; the
request's keys are rows 0 .. lens + offsets[last row] (nodes ascend within a request). Rows
p >= row_start[R] are pad rows, in no request: KH extra programs (request index R) write zeros
to their output and read no KV. grid = ((R + 1) * KH, row blocks of U x G rows, num_splits): from
shapes only, like the per-row grid; a request with fewer rows (or none: a frozen slot) leaves the
row blocks past its rows idle.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._device import sm_count
from ._numerics import dot_f32acc, round_to
from .launch_overlap import await_inputs, launch_dependents, overlap_available

LOG2E = 1.4426950408889634
MAX_SPLITS = 64
MERGE_ELEMENTS = 8192   # fp32 values per merge tile ([rows, splits, D]): 64 registers a thread at 4 warps

# Measured launch parameters of the per-row mode by (row band, head_dim), replacing the rule's where one is
# listed (`python bench/attention_tune.py --apply OUT/attention_tune.json` writes them; commit the JSON with it).
# A row band is attention_row_band(T x G), the queries of one kv head. Grouped (packed) forwards keep the rule.
# (512, 128): the 8B target's 65-node tree verify, measured on an H100 (bench/results/gpu-2026-12-07-session28/
# call4): 15.5 -> 12.6 us a launch at 256 cached keys, 21.7 -> 18.5 at 512, 37.4 -> 24.1 at 2048; `specir bench`
# of a depth-10 tree at code completion 741.2 -> 744.0 tokens/s on that machine. Not measured on an H200.
ATTENTION_TILES: dict[tuple[int, int], dict] = {
    (512, 128): {'block_m': 64, 'block_n': 64, 'min_chunk': 512, 'num_warps': 4},
}
ATTENTION_FIELDS = frozenset({"block_m", "block_n", "num_warps", "min_chunk"})


def attention_row_band(rows: int) -> int:
    """ATTENTION_TILES' row band of `rows` queries per kv head: the next power of two."""
    return 1 << (max(rows, 1) - 1).bit_length()

_counters: dict[torch.device, torch.Tensor] = {}
_retired: list[torch.Tensor] = []  # outgrown counter buffers stay alive: captured graphs may point at them


def counter_buffer(device, size: int) -> torch.Tensor:
    """Zeroed int32 arrival counters shared by every attention launch on `device` (each launch
    leaves them zeroed; launches on one stream never overlap). Allocated with room for 65536
    tiles on the first (eager) call, so calls inside CUDA-graph capture do not allocate."""
    device = torch.device(device)
    buf = _counters.get(device)
    if buf is None or buf.numel() < size:
        if buf is not None:
            _retired.append(buf)
        buf = torch.zeros(max(size, 65536), dtype=torch.int32, device=device)
        _counters[device] = buf
    return buf


@triton.jit
def _split_bounds(kv_len, split, num_splits, min_chunk, BLOCK_N: tl.constexpr):
    """(chunk length, chunk start, chunk end) of split `split` of keys 0 .. kv_len - 1."""
    chunk = tl.maximum(tl.cdiv(tl.cdiv(kv_len, num_splits), BLOCK_N) * BLOCK_N, min_chunk)
    start = split * chunk
    end = tl.minimum(start + chunk, kv_len)
    return chunk, start, end


@triton.jit
def _merge_splits(o_part_ptr, lse_part_ptr, out_ptr, kh, row0, rows_end, part_row0, out_base, stride_ot, stride_oh,
                  n_active, num_splits,
                  KH: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                  MR: tl.constexpr, SB: tl.constexpr, S_P2: tl.constexpr):
    """Merge the partials of splits 0 .. n_active-1 for rows row0 .. rows_end-1 (row = t * G + g;
    query t's partials at flat row part_row0 + t, its output at out_base + t * stride_ot) and store
    the output rows. Partials are read with .cg (L2: other programs wrote them)."""
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D
    s_all = tl.arange(0, S_P2)
    for r0 in range(row0, rows_end, MR):
        r = r0 + tl.arange(0, MR)
        r_ok = r < rows_end
        t = r // G
        head = kh * G + r % G
        base = ((part_row0 + t) * (KH * G) + head) * num_splits                        # [MR]
        lse_all = tl.load(lse_part_ptr + base[:, None] + s_all[None, :],
                          mask=r_ok[:, None] & (s_all < n_active)[None, :], other=float("-inf"),
                          cache_modifier=".cg")
        m = tl.max(lse_all, 1)
        m_safe = tl.where(m == float("-inf"), 0.0, m)
        l_sum = tl.sum(tl.exp2(lse_all - m_safe[:, None]), 1)
        acc = tl.zeros([MR, BLOCK_D], tl.float32)
        for s0 in range(0, n_active, SB):
            s = s0 + tl.arange(0, SB)
            ok = r_ok[:, None] & (s < n_active)[None, :]                                   # [MR, SB]
            idx = base[:, None] + s[None, :]
            lse = tl.load(lse_part_ptr + idx, mask=ok, other=float("-inf"), cache_modifier=".cg")
            w = tl.exp2(lse - m_safe[:, None])
            o = tl.load(o_part_ptr + idx[:, :, None] * D + d[None, None, :],
                        mask=ok[:, :, None] & d_ok[None, None, :], other=0.0, cache_modifier=".cg")
            acc += tl.sum(w[:, :, None] * o, 1)
        result = acc / tl.where(l_sum > 0.0, l_sum, 1.0)[:, None]
        o_ptrs = out_ptr + out_base + t[:, None] * stride_ot + head[:, None] * stride_oh + d[None, :]
        tl.store(o_ptrs, round_to(result, out_ptr.dtype.element_ty), mask=r_ok[:, None] & d_ok[None, :])


@triton.jit
def _zero_pad_rows(out_ptr, first, P, kh, pid_m, m_programs, stride_ob, stride_oh,
                   G: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Grouped mode: zeros into the kv head kh columns of the pad rows first .. P - 1 (row blocks
    pid_m, pid_m + m_programs, ...): a pad row's attention output is defined and finite."""
    d = tl.arange(0, BLOCK_D)
    n = (P - first) * G
    zeros = tl.zeros([BLOCK_M, BLOCK_D], out_ptr.dtype.element_ty)
    for r0 in range(pid_m * BLOCK_M, n, m_programs * BLOCK_M):
        r = r0 + tl.arange(0, BLOCK_M)
        p = (first + r // G).to(tl.int64)
        head = kh * G + r % G
        tl.store(out_ptr + p[:, None] * stride_ob + head[:, None] * stride_oh + d[None, :], zeros,
                 mask=(r < n)[:, None] & (d < D)[None, :])


@triton.jit
def _online_softmax_step(m_i, l_i, acc, s, v, MASKED: tl.constexpr):
    """One key block of the online softmax: scores s [M, N] (log2 units), values v [N, D] ->
    (m, l, acc). MASKED: a row of s may be all -inf (no NaN then: its reference max is 0)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_ref = m_new
    if MASKED:
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_ref)
    p = tl.exp2(s - m_ref[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + dot_f32acc(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def _attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, lens_ptr, mask_ptr, out_ptr, o_part_ptr, lse_part_ptr, cnt_ptr,
    slots_ptr, offsets_ptr, pos_ptr, row_start_ptr,
    stride_qb, stride_qt, stride_qh,
    stride_cb, stride_ch, stride_cs,
    stride_mb, stride_mt, stride_mu,
    stride_ob, stride_ot, stride_oh,
    stride_pb, T, U, R, P, max_seq, qk_scale_log2, num_splits, min_chunk, window,
    KH: tl.constexpr, G: tl.constexpr, D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    SPLIT: tl.constexpr, HAS_TREE_MASK: tl.constexpr, HAS_SLOTS: tl.constexpr, HAS_OFFSETS: tl.constexpr,
    HAS_WINDOW: tl.constexpr, GROUPED: tl.constexpr,
    MR: tl.constexpr, SB: tl.constexpr, S_P2: tl.constexpr, LET_NEXT_START: tl.constexpr = False,
    PDL: tl.constexpr = False,
):
    # launch_dependents() only where the next launch prefetches (lets_next_start): without a prefetch, the overlapped
    # o projection's programs sat waiting beside the attention's and the attention took 0.235 ms a step instead of
    # 0.170 (session 23, H100)
    if LET_NEXT_START:
        launch_dependents()
    await_inputs(PDL)
    pid_m = tl.program_id(1)
    b = tl.program_id(0) // KH
    kh = tl.program_id(0) % KH
    split = tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    t = rows // G
    head = kh * G + rows % G
    d = tl.arange(0, BLOCK_D)
    d_ok = d < D

    # Where query t of this program's request lives: its q / out / mask / pos rows at base + t * step,
    # its partials at flat row part_row0 + t; `diagonal` its own scratch row, n_q the request's queries.
    if GROUPED:  # request b owns packed rows row_start[b] .. row_start[b + 1] - 1, one token each
        row0 = tl.load(row_start_ptr + b)
        if b == R:  # the pad rows: zeros, no KV read
            if split == 0:
                _zero_pad_rows(out_ptr, row0, P, kh, pid_m, tl.num_programs(1), stride_ob, stride_oh,
                               G, D, BLOCK_M, BLOCK_D)
            return
        n_q = tl.load(row_start_ptr + b + 1) - row0
        row_ok = t < n_q
        has_rows = pid_m * BLOCK_M < n_q * G     # a row block past the request's rows is idle
        prefix = tl.load(lens_ptr + row0, mask=has_rows, other=0).to(tl.int32)
        cache_b = tl.load(slots_ptr + row0, mask=has_rows, other=0).to(tl.int64)
        diagonal = tl.load(offsets_ptr + row0 + t, mask=row_ok, other=0).to(tl.int32)
        last = tl.load(offsets_ptr + row0 + n_q - 1, mask=has_rows, other=-1).to(tl.int32)
        kv_len = tl.where(has_rows, tl.minimum(prefix + last + 1, max_seq), 0)
        part_row0 = row0.to(tl.int64)
        q_base, q_step = part_row0 * stride_qb, stride_qb
        m_base, m_step = part_row0 * stride_mb, stride_mb
        o_base, o_step = part_row0 * stride_ob, stride_ob
        p_base, p_step = part_row0 * stride_pb, stride_pb
    else:  # request b is q's row b: T tokens
        n_q = T
        row_ok = t < T
        prefix = tl.load(lens_ptr + b).to(tl.int32)
        offset = 0
        if HAS_OFFSETS:
            offset = tl.load(offsets_ptr + b).to(tl.int32)
        cache_b = b.to(tl.int64)
        if HAS_SLOTS:
            cache_b = tl.load(slots_ptr + b).to(tl.int64)
        diagonal = offset + t
        kv_len = tl.minimum(prefix + offset + T, max_seq)
        part_row0 = b.to(tl.int64) * T
        q_base, q_step = b.to(tl.int64) * stride_qb, stride_qt
        m_base, m_step = b.to(tl.int64) * stride_mb, stride_mt
        o_base, o_step = b.to(tl.int64) * stride_ob, stride_ot
        p_base, p_step = b.to(tl.int64) * stride_pb, 1
    chunk, start, end = _split_bounds(kv_len, split, num_splits, min_chunk, BLOCK_N)

    q = tl.load(q_ptr + q_base + t[:, None] * q_step + head[:, None] * stride_qh + d[None, :],
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    cache_base = cache_b * stride_cb + kh.to(tl.int64) * stride_ch
    k_base = k_cache_ptr + cache_base
    v_base = v_cache_ptr + cache_base
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    cols = tl.arange(0, BLOCK_N)

    # 1) blocks wholly inside the committed prefix: every key visible to every query, no masks
    #    (with a window: committed row r holds position r, seen where pos - r < window; blocks
    #    below every query's window are skipped, the others masked). K and V of a block are
    #    requested together (a one-block chunk waits for memory once).
    prefix_end = tl.minimum(end, (prefix // BLOCK_N) * BLOCK_N)
    qpos = tl.zeros([BLOCK_M], tl.int32)
    first = start
    if HAS_WINDOW:
        qpos = tl.load(pos_ptr + p_base + t * p_step, mask=row_ok, other=0).to(tl.int32)
        lowest = tl.min(tl.where(row_ok, qpos, 2147483647), 0) - window + 1
        first = tl.maximum(start, (tl.maximum(lowest, 0) // BLOCK_N) * BLOCK_N)
    for n0 in range(first, prefix_end, BLOCK_N):
        kpos = n0 + cols
        k_t = tl.load(k_base + kpos[None, :] * stride_cs + d[:, None], mask=d_ok[:, None], other=0.0)
        v = tl.load(v_base + kpos[:, None] * stride_cs + d[None, :], mask=d_ok[None, :], other=0.0)
        s = dot_f32acc(q, k_t) * qk_scale_log2
        if HAS_WINDOW:
            s = tl.where((qpos[:, None] - kpos[None, :]) < window, s, float("-inf"))
        m_i, l_i, acc = _online_softmax_step(m_i, l_i, acc, s, v, HAS_WINDOW)

    # 2) the rest of the chunk: prefix tail, the new tokens (tree / causal mask), the chunk end
    for n0 in range(tl.maximum(start, prefix_end), end, BLOCK_N):
        kpos = n0 + cols
        key_ok = kpos < end
        u = kpos - prefix                      # column of the new / scratch rows
        k_t = tl.load(k_base + kpos[None, :] * stride_cs + d[:, None], mask=key_ok[None, :] & d_ok[:, None], other=0.0)
        v = tl.load(v_base + kpos[:, None] * stride_cs + d[None, :], mask=key_ok[:, None] & d_ok[None, :], other=0.0)
        if HAS_TREE_MASK:
            new_ok = tl.load(mask_ptr + m_base + t[:, None] * m_step + u[None, :] * stride_mu,
                             mask=row_ok[:, None] & ((u >= 0) & (u < U))[None, :], other=0) != 0
            new_ok = new_ok | (u[None, :] == diagonal[:, None])
            if GROUPED:  # the request's keys reach its last node: columns past a row's own are ignored
                new_ok = new_ok & (u[None, :] <= diagonal[:, None])
        else:
            new_ok = (u >= 0)[None, :] & (u[None, :] <= diagonal[:, None])
        visible = key_ok[None, :] & ((u < 0)[None, :] | new_ok)
        if HAS_WINDOW:
            in_window = (qpos[:, None] - kpos[None, :]) < window
            if HAS_TREE_MASK:  # a tree's rows are not its positions: its new rows are within (window > T)
                visible = visible & ((u >= 0)[None, :] | in_window)
            else:  # causal: row r holds position r, new rows too
                visible = visible & in_window
        s = tl.where(visible, dot_f32acc(q, k_t) * qk_scale_log2, float("-inf"))
        m_i, l_i, acc = _online_softmax_step(m_i, l_i, acc, s, v, True)

    has_keys = l_i > 0.0
    result = acc / tl.where(has_keys, l_i, 1.0)[:, None]
    o_ptrs = out_ptr + o_base + t[:, None] * o_step + head[:, None] * stride_oh + d[None, :]
    if not SPLIT:
        tl.store(o_ptrs, round_to(result, out_ptr.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])
    else:
        n_active = tl.cdiv(kv_len, chunk)      # splits with keys; the others stop here
        if start < kv_len:
            if n_active == 1:
                tl.store(o_ptrs, round_to(result, out_ptr.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])
            else:
                part = ((part_row0 + t) * (KH * G) + head) * num_splits + split      # [BLOCK_M]
                tl.store(o_part_ptr + part[:, None] * D + d[None, :], result, mask=row_ok[:, None] & d_ok[None, :])
                lse = tl.where(has_keys, m_i + tl.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
                tl.store(lse_part_ptr + part, lse, mask=row_ok)
                tl.debug_barrier()
                tile = pid_m + tl.num_programs(1) * tl.program_id(0)
                arrived = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
                if arrived == n_active - 1:
                    row_first = pid_m * BLOCK_M
                    _merge_splits(o_part_ptr, lse_part_ptr, out_ptr, kh, row_first,
                                  tl.minimum(row_first + BLOCK_M, n_q * G), part_row0, o_base, o_step, stride_oh,
                                  n_active, num_splits, KH, G, D, BLOCK_D, MR, SB, S_P2)
                    tl.atomic_xchg(cnt_ptr + tile, 0)


def attention_config(B, T, H, KH, D, max_seq, device=None, num_splits=None, block_m=None, block_n=None,
                     num_warps=None, num_stages=None, min_chunk=None, sm=None, merge_rows=None, merge_splits=None,
                     grouped: bool = False):
    """Launch parameters chosen from shapes only (never from lens): a dict the wrapper uses.
    B requests of T queries; `grouped` (the wrapper's row_start mode): B requests of at most T
    packed one-token rows each, plus KH programs on grid axis 0 for the pad rows.

    Row blocks hold T*G queries of one kv head. A split covers at least `min_chunk` keys
    (default 4*T*G rounded up to BLOCK_N: the fp32 partials of a split, T*G*(D+1)*4 bytes per
    kv head, then cost at most about half of the K/V bytes it reads); the split count fills the
    GPU about four programs deep per SM (`sm`, default the device's SM count), capped by the
    cache length and MAX_SPLITS. The chunk length itself is computed on the device from the
    actual length, so short contexts use few splits and the other programs exit at once.
    merge_rows x merge_splits x BLOCK_D is the tile the last split merges per step. In the per-row mode
    an ATTENTION_TILES entry for (attention_row_band(T x G), D) gives the fields it lists, where the call
    states none."""
    G = H // KH
    rows = T * G
    tile = {} if grouped else ATTENTION_TILES.get((attention_row_band(rows), D), {})
    block_m = tile.get("block_m") if block_m is None else block_m
    block_n = tile.get("block_n") if block_n is None else block_n
    num_warps = tile.get("num_warps") if num_warps is None else num_warps
    min_chunk = tile.get("min_chunk") if min_chunk is None else min_chunk
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
        sms = sm if sm is not None else sm_count(device)
        wanted = triton.cdiv(4 * sms, B * KH * m_blocks)
        num_splits = max(1, min(wanted, triton.cdiv(max_seq, min_chunk), MAX_SPLITS))
    block_d = triton.next_power_of_2(D)
    if merge_rows is None:
        merge_rows = max(1, min(block_m, triton.next_power_of_2(rows), MERGE_ELEMENTS // block_d))
    if merge_splits is None:
        merge_splits = max(1, min(triton.next_power_of_2(num_splits), MERGE_ELEMENTS // (merge_rows * block_d)))
    return dict(block_m=block_m, block_n=block_n, num_splits=num_splits, m_blocks=m_blocks, min_chunk=min_chunk,
                num_warps=num_warps, num_stages=num_stages or 2, merge_rows=merge_rows, merge_splits=merge_splits,
                grid=[(B + grouped) * KH, m_blocks, num_splits], launches=1,  # attention_grid's order
                grouped=bool(grouped))


CUDA_GRID_YZ_LIMIT = 65535  # grid axes 1 and 2 (axis 0: 2**31 - 1)


def attention_grid(cfg: dict) -> tuple[int, int, int]:
    """attention_config's grid (B * KH (grouped: (B + 1) * KH), row blocks, splits), checked
    against CUDA's limits."""
    grid = tuple(cfg["grid"])
    if max(grid[1:]) > CUDA_GRID_YZ_LIMIT:
        raise ValueError(f"attention grid {grid}: row blocks and splits must stay <= {CUDA_GRID_YZ_LIMIT}")
    return grid


def attention_workspace(B, T, H, D, num_splits, device) -> torch.Tensor:
    """fp32 scratch for the split-KV partials (reuse it across layers and steps)."""
    return torch.empty(B * T * H * num_splits * (D + 1), dtype=torch.float32, device=device)


def attention(q, k_cache, v_cache, lens, tree_mask=None, scale=None, *, out=None, workspace=None,
              slots=None, offsets=None, pos=None, window: int = 0, row_start=None, lets_next_start: bool = False,
              overlapped: bool = False, **config):
    """q [B, T, H, D]; k_cache, v_cache [slots, KH, max_seq, D]; lens [B] int; tree_mask
    [B, T, U >= T] bool or None (causal). Returns out [B, T, H, D] in q.dtype.

    Query t of request b (cache slot slots[b], default b) sees rows < lens[b] and row
    lens[b] + u for u < offsets[b] + T (offsets default 0) where tree_mask[b, t, u], or
    u <= offsets[b] + t without a mask; its own row u = offsets[b] + t always. Rows
    lens[b] .. lens[b] + offsets[b] - 1 are scratch rows written by earlier forwards. A sliding
    window (window > 0, with pos [B, T] the queries' positions): committed row r (position r) is
    seen only where pos[b, t] - r < window; without a tree mask the new rows too (row = position:
    prefills and chains); with one, window must exceed T (a tree's new rows lie within it).

    row_start [R + 1] int32 (grouped mode, a packed forward): q [P, 1, H, D] is P one-token rows
    and request r owns rows row_start[r] .. row_start[r + 1] - 1 (ascending, row_start[0] = 0), at
    most U of them (one per node of the mask [P, 1, U], which is required, as are slots and
    offsets: row p is node offsets[p], ascending within a request; lens and slots equal on a
    request's rows). Each row's output is the per-row mode's (same inputs without row_start: mask
    columns past a row's own node are ignored), but a request's KV is read once per (kv head,
    split, row block), not once per row. Rows p >= row_start[R] are pad rows: their output is zero
    (a window must then exceed U).

    `config` overrides launch parameters (num_splits, block_m, block_n, num_warps, num_stages,
    min_chunk, merge_rows, merge_splits: powers of two);
    see attention_config. `workspace` (attention_workspace(...)) avoids an allocation when
    num_splits > 1. One launch; with num_splits > 1 it uses this device's arrival counters
    (counter_buffer), so launches sharing a device must run on one stream.
    Launch overlap (launch_overlap.py; same values): `lets_next_start` lets the next launch, if it asked for
    launch_pdl, be scheduled once every attention program has started (for one that prefetches its weights
    meanwhile); `overlapped` asks for launch_pdl itself on sm_90+ (every program waits for the launch before it
    at its first instruction)."""
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
    if window and (pos is None or tuple(pos.shape) != (B, T) or pos.stride(1) != 1):
        raise ValueError(f"a window of {window} needs pos [{B}, {T}] (rows contiguous)")
    if tree_mask is not None:
        if tree_mask.dim() != 3 or tree_mask.shape[:2] != (B, T) or tree_mask.shape[2] < T:
            raise ValueError(f"tree_mask shape {tuple(tree_mask.shape)} is not [{B}, {T}, U >= {T}]")
        mask = tree_mask.view(torch.uint8) if tree_mask.dtype == torch.bool else tree_mask
        mask_strides = mask.stride()
    else:
        mask, mask_strides = lens, (0, 0, 0)
    U = T if tree_mask is None else tree_mask.shape[2]
    grouped = row_start is not None
    if grouped:
        if T != 1 or tree_mask is None or offsets is None or slots is None:
            raise ValueError(f"row_start (grouped rows) needs one-token rows (T = {T}), a tree mask, slots and "
                             "offsets")
        if row_start.dim() != 1 or row_start.numel() < 2 or row_start.dtype != torch.int32:
            raise ValueError(f"row_start must be int32 [R + 1], R >= 1, not {row_start.dtype} {tuple(row_start.shape)}")
    nodes = U if grouped else T  # the most new rows one request holds
    if window and tree_mask is not None and window <= nodes:
        raise ValueError(f"a window of {window} over a tree must exceed its T = {nodes} nodes")
    R = row_start.numel() - 1 if grouped else B
    cfg = attention_config(R, nodes, H, KH, D, max_seq, q.device, grouped=grouped, **config)
    splits = cfg["num_splits"]
    if splits > 1:
        need = B * T * H * splits * (D + 1)
        if workspace is None:
            workspace = torch.empty(need, dtype=torch.float32, device=q.device)
        elif workspace.dtype != torch.float32 or workspace.numel() < need:
            raise ValueError(f"workspace must be fp32 with >= {need} elements")
        o_part, lse_part = workspace[: B * T * H * splits * D], workspace[B * T * H * splits * D: need]
        counters = counter_buffer(q.device, cfg["m_blocks"] * cfg["grid"][0])
    else:
        o_part = lse_part = counters = out
    grid = attention_grid(cfg)
    pdl = dict(PDL=True, launch_pdl=True) if overlapped and overlap_available(q.device) else {}
    _attention_kernel[grid](
        q, k_cache, v_cache, lens, mask, out, o_part, lse_part, counters,
        lens if slots is None else slots, lens if offsets is None else offsets, lens if not window else pos,
        row_start if grouped else lens,
        q.stride(0), q.stride(1), q.stride(2),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        *mask_strides,
        out.stride(0), out.stride(1), out.stride(2),
        pos.stride(0) if window else 0,
        T, U, R, B, max_seq, scale * LOG2E, splits, cfg["min_chunk"], window,
        KH=KH, G=H // KH, D=D,
        BLOCK_M=cfg["block_m"], BLOCK_N=cfg["block_n"], BLOCK_D=triton.next_power_of_2(D),
        SPLIT=splits > 1, HAS_TREE_MASK=tree_mask is not None,
        HAS_SLOTS=slots is not None, HAS_OFFSETS=offsets is not None, HAS_WINDOW=bool(window), GROUPED=grouped,
        MR=cfg["merge_rows"], SB=cfg["merge_splits"], S_P2=triton.next_power_of_2(splits),
        LET_NEXT_START=lets_next_start, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **pdl,
    )
    return out
