"""Mamba2 selective scan with per-node state: decode step, chain verify and tree verify (the
`mamba2_scan` op; reference: backends/reference/recurrent.py).

State layout (specir/runtime/recurrent_state.py): committed [slots, H, P, N] and a scratch ring
[slots, nodes, H, P, N], fp32. One program per (request, head, block of head channels) holds its
[BLOCK_P, N] slice of the state in registers and walks the tokens in order: each token starts from
its parent's state (-1: committed), kept in registers along a chain (CHAIN), read back from
scratch in a tree; every node's state is written to scratch. A tree forward that fits the ring
runs the kernel's PATHS variant: one program per node replaying its path (tree_paths.py). fp32 arithmetic: dt =
clamp(softplus(dt + dt_bias), dt_min, dt_max), h = h * exp(-exp(A_log) dt) + (dt x) B^T,
y = h C + D x, rounded once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._numerics import round_to, softplus
from ._state_ring import load_state_at, store_state
from .tree_paths import replays_paths


@triton.jit
def _ssm_token(s, row, dt_row, h, g, p, in_p, n, in_n, a_coef, d, dt_bias, dt_min, dt_max,
               H: tl.constexpr, P: tl.constexpr, G: tl.constexpr, N: tl.constexpr):
    """One token's selective-scan update of the [BLOCK_P, NP] fp32 state slice `s` (row, dt_row:
    the token's xbc and dt rows); returns (state after the token, its output y in fp32)."""
    dt_raw = tl.load(dt_row + h).to(tl.float32)
    x = tl.load(row + h * P + p, mask=in_p, other=0.0).to(tl.float32)
    bv = tl.load(row + H * P + g * N + n, mask=in_n, other=0.0).to(tl.float32)
    cv = tl.load(row + H * P + G * N + g * N + n, mask=in_n, other=0.0).to(tl.float32)
    dt = softplus(dt_raw + dt_bias)
    dt = tl.minimum(tl.maximum(dt, dt_min), dt_max)
    s = s * tl.exp(dt * a_coef) + (dt * x)[:, None] * bv[None, :]
    y = tl.sum(s * cv[None, :], axis=1) + d * x
    return s, y


@triton.jit
def _mamba2_scan_kernel(
    xbc_ptr, dt_ptr, a_log_ptr, d_ptr, dt_bias_ptr, out_ptr, committed_ptr, scratch_ptr,
    slots_ptr, base_ptr, nodes_ptr, parents_ptr, path_ptr, depth_ptr, start_ptr,
    T, W, stride_xb, stride_xt, stride_db, stride_dt, stride_ob, stride_ot, dt_min, dt_max,
    H: tl.constexpr, P: tl.constexpr, G: tl.constexpr, N: tl.constexpr,
    NP: tl.constexpr, BLOCK_P: tl.constexpr, CHAIN: tl.constexpr, PATHS: tl.constexpr,
):
    """Axis 0: the request (walk), or request x node (PATHS); axes 1, 2: head, head-channel block.
    Walk and PATHS as in gated_delta._gated_delta_kernel, with _ssm_token as the per-token update."""
    if PATHS:
        b = tl.program_id(0).to(tl.int64) // T
        t = tl.program_id(0).to(tl.int64) % T
    else:
        b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    g = h // (H // G)
    p = tl.program_id(2) * BLOCK_P + tl.arange(0, BLOCK_P)
    in_p = p < P
    n = tl.arange(0, NP)
    in_n = n < N
    m2 = in_p[:, None] & in_n[None, :]
    act_dtype = out_ptr.dtype.element_ty
    slot = tl.load(slots_ptr + b).to(tl.int64)
    base = tl.load(base_ptr + slot).to(tl.int64)
    per_node = H * P * N
    idx = h * P * N + p[:, None] * N + n[None, :]
    committed = committed_ptr + slot * per_node
    a_coef = -tl.exp(tl.load(a_log_ptr + h).to(tl.float32))
    d = tl.load(d_ptr + h).to(tl.float32)
    dt_bias = tl.load(dt_bias_ptr + h).to(tl.float32)
    if PATHS:
        s = load_state_at(start_ptr + b * T + t, committed, scratch_ptr, slot, base, W, per_node, idx, m2)
        y = tl.zeros([BLOCK_P], dtype=tl.float32)
        for i in range(0, tl.load(depth_ptr + b * T + t)):
            u = tl.load(path_ptr + (b * T + t) * T + i).to(tl.int64)
            s, y = _ssm_token(s, xbc_ptr + b * stride_xb + u * stride_xt, dt_ptr + b * stride_db + u * stride_dt,
                              h, g, p, in_p, n, in_n, a_coef, d, dt_bias, dt_min, dt_max, H, P, G, N)
        tl.store(out_ptr + b * stride_ob + t * stride_ot + h * P + p, round_to(y, act_dtype), mask=in_p)
        store_state(s, tl.load(nodes_ptr + b * T + t).to(tl.int64), scratch_ptr, slot, base, W, per_node, idx, m2)
    else:
        s = load_state_at(parents_ptr + b * T, committed, scratch_ptr, slot, base, W, per_node, idx, m2)
        for t in range(0, T):
            if not CHAIN:
                s = load_state_at(parents_ptr + b * T + t, committed, scratch_ptr, slot, base, W, per_node, idx, m2)
            s, y = _ssm_token(s, xbc_ptr + b * stride_xb + t * stride_xt, dt_ptr + b * stride_db + t * stride_dt,
                              h, g, p, in_p, n, in_n, a_coef, d, dt_bias, dt_min, dt_max, H, P, G, N)
            tl.store(out_ptr + b * stride_ob + t * stride_ot + h * P + p, round_to(y, act_dtype), mask=in_p)
            store_state(s, tl.load(nodes_ptr + b * T + t).to(tl.int64), scratch_ptr, slot, base, W, per_node,
                        idx, m2)
            if not CHAIN:
                tl.debug_barrier()  # the node's state is visible to its children's reads


def mamba2_scan_tree(xbc: torch.Tensor, dt: torch.Tensor, a_log: torch.Tensor, d: torch.Tensor,
                     dt_bias: torch.Tensor, rf, key, *, heads: int, head_dim: int, groups: int, state_size: int,
                     dt_min: float = 0.0, dt_max: float = float("inf"), out: torch.Tensor | None = None,
                     block_p: int = 16) -> torch.Tensor:
    """xbc [B, T, H*P + 2*G*N], dt [B, T, H] -> y [B, T, H*P]; writes every node's state into
    rf.store.scratch[key] (rf: a RecurrentForward)."""
    B, T, _ = xbc.shape
    committed, scratch = rf.store.committed[key], rf.store.scratch[key]
    if committed.shape[1:] != (heads, head_dim, state_size) or committed.dtype != torch.float32:
        raise ValueError(f"ssm state {tuple(committed.shape[1:])} {committed.dtype} != ({heads}, {head_dim}, "
                         f"{state_size}) float32")
    xbc, dt = (t if t.stride(-1) == 1 else t.contiguous() for t in (xbc, dt))
    out = torch.empty(B, T, heads * head_dim, dtype=xbc.dtype, device=xbc.device) if out is None else out
    if B == 0 or T == 0:
        return out
    block = min(block_p, triton.next_power_of_2(head_dim))
    args = (T, rf.store.nodes, xbc.stride(0), xbc.stride(1), dt.stride(0), dt.stride(1), out.stride(0),
            out.stride(1), float(dt_min), float(dt_max))
    shape = dict(H=heads, P=head_dim, G=groups, N=state_size, NP=triton.next_power_of_2(state_size), BLOCK_P=block)
    paths = replays_paths(rf, T)
    path, depth, start = rf.paths() if paths else (rf.parents,) * 3  # unread without PATHS
    _mamba2_scan_kernel[(B * T if paths else B, heads, triton.cdiv(head_dim, block))](
        xbc, dt, a_log, d, dt_bias, out, committed, scratch,
        rf.slots.contiguous(), rf.store.base, rf.nodes.contiguous(), rf.parents.contiguous(), path, depth, start,
        *args, **shape, CHAIN=bool(rf.chain), PATHS=paths, num_warps=4)
    return out
