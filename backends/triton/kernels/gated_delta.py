"""Gated delta rule (Gated DeltaNet) with per-node state: decode step, chain verify and tree
verify (the `gated_delta_rule` op; reference: backends/reference/recurrent.py).

State layout (specir/runtime/recurrent_state.py): committed [slots, Hv, Dk, Dv] and a scratch
ring [slots, nodes, Hv, Dk, Dv], fp32. One program per (request, value head, block of value
channels) holds its [Dk, BLOCK_V] slice of the state in registers and walks the tokens in order:
each token starts from its parent's state (-1: committed), which a chain (CHAIN) keeps in
registers and a tree reads back from scratch; every node's state is written to scratch.
A tree forward that fits the ring runs the kernel's PATHS variant instead: one program per node,
replaying the node's path from the state before the forward (a tree's depth, not its node count,
is then the serial length; the arithmetic, `_delta_token`, is the same).
All arithmetic in fp32 (q, k L2-normalised with eps 1e-6, q scaled by Dk^-0.5, beta =
sigmoid(b) rounded to the activation dtype as transformers computes it); the output is rounded
once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._numerics import round_to, softplus
from ._state_ring import store_state
from .delta_factors import attach_delta_factors, load_delta_state, shrink_factored
from .tree_paths import replays_paths


@triton.jit
def delta_inputs(row, b_row, a_row, h, kh, dk, in_k, dv, in_v, a_coef, dt_bias, scale,
                 HK: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr, act_dtype: tl.constexpr):
    """One token's inputs to the delta rule for value head h (row, b_row, a_row: its qkv, b and a
    rows): (q scaled and L2-normalised, k L2-normalised [DKP], v [BLOCK_V], beta, log decay g), fp32."""
    q = tl.load(row + kh * DK + dk, mask=in_k, other=0.0).to(tl.float32)
    k = tl.load(row + HK * DK + kh * DK + dk, mask=in_k, other=0.0).to(tl.float32)
    v = tl.load(row + 2 * HK * DK + h * DV + dv, mask=in_v, other=0.0).to(tl.float32)
    q = q * tl.rsqrt(tl.sum(q * q, axis=0) + 1e-6) * scale
    k = k * tl.rsqrt(tl.sum(k * k, axis=0) + 1e-6)
    beta = round_to(1.0 / (1.0 + tl.exp(-tl.load(b_row + h).to(tl.float32))), act_dtype).to(tl.float32)
    g = a_coef * softplus(tl.load(a_row + h).to(tl.float32) + dt_bias)
    return q, k, v, beta, g


@triton.jit
def _delta_token(s, row, b_row, a_row, h, kh, dk, in_k, dv, in_v, a_coef, dt_bias, scale,
                 HK: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr, act_dtype: tl.constexpr):
    """One token's gated delta update of the [DKP, BLOCK_V] fp32 state slice `s` (row, b_row, a_row:
    the token's qkv, b and a rows); returns (state after the token, its scaled q)."""
    q, k, v, beta, g = delta_inputs(row, b_row, a_row, h, kh, dk, in_k, dv, in_v, a_coef, dt_bias, scale,
                                    HK, DK, DV, act_dtype)
    s = s * tl.exp(g)
    memory = tl.sum(s * k[:, None], axis=0)
    delta = (v - memory) * beta
    s = s + k[:, None] * delta[None, :]
    return s, q


@triton.jit
def _gated_delta_kernel(
    qkv_ptr, b_ptr, a_ptr, a_log_ptr, dt_bias_ptr, out_ptr, committed_ptr, scratch_ptr,
    slots_ptr, base_ptr, nodes_ptr, parents_ptr, path_ptr, depth_ptr, start_ptr,
    fk, fu, fg, fpath, fdepth, fmeta, R,
    T, W, stride_qb, stride_qt, stride_bb, stride_bt, stride_ab, stride_at, stride_ob, stride_ot,
    HK: tl.constexpr, HV: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
    DKP: tl.constexpr, BLOCK_V: tl.constexpr, CHAIN: tl.constexpr, PATHS: tl.constexpr,
    STORE: tl.constexpr = True, FACTORS: tl.constexpr = False,
):
    """Axis 0: the request (walk), or request x node (PATHS); axes 1, 2: value head, value block.
    Walk: the tokens in order, each from its parent's state (a chain keeps it in registers).
    PATHS (a tree): the node replays its path (RecurrentForward.paths: its ancestors in this
    forward, then itself) from the state before the forward, in registers, and writes only its own
    state and output; no program waits for another, and the serial length is the tree's depth.
    Both run _delta_token in the same order (bit-identical under the interpreter, tested).
    FACTORS: the key keeps factored nodes (delta_factors.py): a start or parent before this
    forward is read through them, and the record gives up the nodes this forward rewrites."""
    if PATHS:
        b = tl.program_id(0).to(tl.int64) // T
        t = tl.program_id(0).to(tl.int64) % T
    else:
        b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    kh = h // (HV // HK)
    dk = tl.arange(0, DKP)
    in_k = dk < DK
    dv = tl.program_id(2) * BLOCK_V + tl.arange(0, BLOCK_V)
    in_v = dv < DV
    m2 = in_k[:, None] & in_v[None, :]
    act_dtype = out_ptr.dtype.element_ty
    slot = tl.load(slots_ptr + b).to(tl.int64)
    base = tl.load(base_ptr + slot).to(tl.int64)
    per_node = HV * DK * DV
    idx = h * DK * DV + dk[:, None] * DV + dv[None, :]
    committed = committed_ptr + slot * per_node
    a_coef = -tl.exp(tl.load(a_log_ptr + h).to(tl.float32))
    dt_bias = tl.load(dt_bias_ptr + h).to(tl.float32)
    scale = 1.0 / tl.sqrt(DK * 1.0)
    first_node = tl.load(nodes_ptr + b * T).to(tl.int64)
    if FACTORS:
        lead = (h == 0) & (tl.program_id(2) == 0)
        if PATHS:
            lead = lead & (t == 0)
        if lead:
            shrink_factored(fmeta, slot, base, first_node)
    if PATHS:
        s = load_delta_state(tl.load(start_ptr + b * T + t), first_node, committed, scratch_ptr, slot, base, W,
                             per_node, idx, m2, fk, fu, fg, fpath, fdepth, fmeta, R, h, dk, dv, in_k, in_v,
                             HV, DK, DV, FACTORS)
        q = tl.zeros([DKP], dtype=tl.float32)
        for i in range(0, tl.load(depth_ptr + b * T + t)):
            u = tl.load(path_ptr + (b * T + t) * T + i).to(tl.int64)
            s, q = _delta_token(s, qkv_ptr + b * stride_qb + u * stride_qt, b_ptr + b * stride_bb + u * stride_bt,
                                a_ptr + b * stride_ab + u * stride_at, h, kh, dk, in_k, dv, in_v, a_coef, dt_bias,
                                scale, HK, DK, DV, act_dtype)
        o = tl.sum(s * q[:, None], axis=0)
        tl.store(out_ptr + b * stride_ob + t * stride_ot + h * DV + dv, round_to(o, act_dtype), mask=in_v)
        if STORE:
            store_state(s, tl.load(nodes_ptr + b * T + t).to(tl.int64), scratch_ptr, slot, base, W, per_node, idx, m2)
    else:
        s = load_delta_state(tl.load(parents_ptr + b * T), first_node, committed, scratch_ptr, slot, base, W,
                             per_node, idx, m2, fk, fu, fg, fpath, fdepth, fmeta, R, h, dk, dv, in_k, in_v,
                             HV, DK, DV, FACTORS)
        for t in range(0, T):
            if not CHAIN:
                s = load_delta_state(tl.load(parents_ptr + b * T + t), first_node, committed, scratch_ptr, slot, base,
                                     W, per_node, idx, m2, fk, fu, fg, fpath, fdepth, fmeta, R, h, dk, dv, in_k, in_v,
                                     HV, DK, DV, FACTORS)
            s, q = _delta_token(s, qkv_ptr + b * stride_qb + t * stride_qt, b_ptr + b * stride_bb + t * stride_bt,
                                a_ptr + b * stride_ab + t * stride_at, h, kh, dk, in_k, dv, in_v, a_coef, dt_bias,
                                scale, HK, DK, DV, act_dtype)
            o = tl.sum(s * q[:, None], axis=0)
            tl.store(out_ptr + b * stride_ob + t * stride_ot + h * DV + dv, round_to(o, act_dtype), mask=in_v)
            store_state(s, tl.load(nodes_ptr + b * T + t).to(tl.int64), scratch_ptr, slot, base, W, per_node,
                        idx, m2)
            if not CHAIN:
                tl.debug_barrier()  # the node's state is visible to its children's reads


def gated_delta_rule_tree(qkv: torch.Tensor, b: torch.Tensor, a: torch.Tensor, a_log: torch.Tensor,
                          dt_bias: torch.Tensor, rf, key, *, k_heads: int, v_heads: int, k_dim: int, v_dim: int,
                          out: torch.Tensor | None = None, block_v: int | None = None,
                          num_warps: int | None = None, store_states: bool = True,
                          variant: str | None = None, precision: str | None = None) -> torch.Tensor:
    """qkv [B, T, 2*Hk*Dk + Hv*Dv], b/a [B, T, Hv] -> [B, T, Hv*Dv]; writes every node's state
    into rf.store.scratch[key] (rf: a RecurrentForward), or, for a tree forward of at most
    delta_factors.CAPACITY nodes on a key with factors attached (the Triton forward attaches them),
    runs the WY tree kernel (gated_delta_wy.py), which keeps the nodes' factors instead.
    `variant` forces one: "wy", "paths" or "walk" (benchmarks and tests); `precision` is WY's
    dot precision (default tf32x3 on a GPU). `store_states=False`
    (PATHS only) computes the outputs without writing node states (bench/recurrent_tree_kernels.py).
    `block_v` / `num_warps` default per variant: the walk 32 / 4, PATHS 64 / 2 (at the Qwen3.5-9B
    shape and 64 nodes on an H200, 95 us a launch against 131 us at 32 / 4; session 16), WY 32 / 4 (8 with
    its root peeled: gated_delta_wy.launch_wy)."""
    B, T, _ = qkv.shape
    committed, scratch = rf.store.committed[key], rf.store.scratch[key]
    if committed.shape[1:] != (v_heads, k_dim, v_dim) or committed.dtype != torch.float32:
        raise ValueError(f"delta state {tuple(committed.shape[1:])} {committed.dtype} != ({v_heads}, {k_dim}, "
                         f"{v_dim}) float32")
    qkv, b, a = (t if t.stride(-1) == 1 else t.contiguous() for t in (qkv, b, a))
    out = torch.empty(B, T, v_heads * v_dim, dtype=qkv.dtype, device=qkv.device) if out is None else out
    if B == 0 or T == 0:
        return out
    factors = rf.store.factored.get(key)
    if variant is None:
        paths = replays_paths(rf, T)
        variant = ("wy" if factors is not None and T <= factors.capacity else "paths") if paths else "walk"
    if variant == "wy":
        from .gated_delta_wy import launch_wy  # it reuses this module's _delta_token
        if factors is None:
            factors = attach_delta_factors(rf.store, key)
        return launch_wy(qkv, b, a, a_log, dt_bias, out, rf, factors, committed, scratch, k_heads=k_heads,
                         v_heads=v_heads, k_dim=k_dim, v_dim=v_dim, block_v=block_v, num_warps=num_warps,
                         precision=precision)
    paths = variant == "paths"
    block_v, num_warps = block_v or (64 if paths else 32), num_warps or (2 if paths else 4)
    block = min(block_v, triton.next_power_of_2(v_dim))
    strides = (qkv.stride(0), qkv.stride(1), b.stride(0), b.stride(1), a.stride(0), a.stride(1),
               out.stride(0), out.stride(1))
    shape = dict(HK=k_heads, HV=v_heads, DK=k_dim, DV=v_dim, DKP=triton.next_power_of_2(k_dim), BLOCK_V=block)
    path, depth, start = rf.paths() if paths else (rf.parents,) * 3  # unread without PATHS
    fargs = factors.args() if factors is not None else (committed,) * 6 + (1,)
    grid = (B * T if paths else B, v_heads, triton.cdiv(v_dim, block))
    _gated_delta_kernel[grid](
        qkv, b, a, a_log, dt_bias, out, committed, scratch,
        rf.slots.contiguous(), rf.store.base, rf.nodes.contiguous(), rf.parents.contiguous(), path, depth, start,
        *fargs, T, rf.store.nodes, *strides, **shape, CHAIN=bool(rf.chain), PATHS=paths,
        STORE=store_states or not paths, FACTORS=factors is not None, num_warps=num_warps)
    return out
