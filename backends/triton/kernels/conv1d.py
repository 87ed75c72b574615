"""Causal depthwise conv1d with per-node state: decode step (T = 1), chain verify and tree verify
in one kernel (the `conv1d` op of specir/ir/ops_recurrent.py; reference:
backends/reference/recurrent.py:conv1d).

State layout (specir/runtime/recurrent_state.py): committed [slots, C, K-1] and a scratch ring
[slots, nodes, C, K-1] in the activation dtype; token t of request b is node nodes[b, t] at ring
position (base[slot] + node) % nodes and starts from the window of parents[b, t] (-1: the
committed window). One program per (request, block of channels) walks the tokens in order (a
parent precedes its children), reading the parent's window from memory, writing the node's.
fp32 accumulation, the sum rounded once to the activation dtype, then silu (as F.conv1d + silu).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._numerics import round_to


@triton.jit
def _conv1d_tree_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, committed_ptr, scratch_ptr,
    slots_ptr, base_ptr, nodes_ptr, parents_ptr,
    T, C, W, stride_xb, stride_xt, stride_ob, stride_ot,
    K: tl.constexpr, KP: tl.constexpr, BLOCK_C: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    in_c = c < C
    j = tl.arange(0, KP)  # window position, 0 = oldest of the K - 1 inputs before a token
    in_win = in_c[:, None] & (j[None, :] < K - 1)
    shifted_ok = in_c[:, None] & (j[None, :] + 1 < K - 1)
    act_dtype = out_ptr.dtype.element_ty
    slot = tl.load(slots_ptr + b).to(tl.int64)
    base = tl.load(base_ptr + slot).to(tl.int64)
    per_node = C.to(tl.int64) * (K - 1)
    idx = c[:, None].to(tl.int64) * (K - 1) + j[None, :]
    w_win = tl.load(w_ptr + c[:, None] * K + j[None, :], mask=in_win, other=0.0).to(tl.float32)
    w_new = tl.load(w_ptr + c * K + (K - 1), mask=in_c, other=0.0).to(tl.float32)
    bias = tl.zeros([BLOCK_C], dtype=tl.float32)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + c, mask=in_c, other=0.0).to(tl.float32)
    committed = committed_ptr + slot * per_node
    for t in range(0, T):
        parent = tl.load(parents_ptr + b * T + t).to(tl.int64)
        node = tl.load(nodes_ptr + b * T + t).to(tl.int64)
        from_parent = scratch_ptr + (slot * W + (base + tl.maximum(parent, 0)) % W) * per_node
        here = scratch_ptr + (slot * W + (base + node) % W) * per_node
        use_c, use_s = parent < 0, parent >= 0
        win = tl.where(use_c, tl.load(committed + idx, mask=in_win & use_c, other=0.0),
                       tl.load(from_parent + idx, mask=in_win & use_s, other=0.0)).to(tl.float32)
        xt = tl.load(x_ptr + b * stride_xb + t * stride_xt + c, mask=in_c, other=0.0)
        y = round_to(tl.sum(win * w_win, axis=1) + xt.to(tl.float32) * w_new + bias, act_dtype)
        if SILU:
            yf = y.to(tl.float32)
            y = round_to(yf / (1.0 + tl.exp(-yf)), act_dtype)
        tl.store(out_ptr + b * stride_ob + t * stride_ot + c, y, mask=in_c)
        shifted = tl.where(use_c, tl.load(committed + idx + 1, mask=shifted_ok & use_c, other=0.0),
                           tl.load(from_parent + idx + 1, mask=shifted_ok & use_s, other=0.0))
        new = tl.where(j[None, :] == K - 2, xt[:, None].to(shifted.dtype), shifted)
        tl.debug_barrier()  # every read of the parent's window precedes the write (they may alias)
        tl.store(here + idx, new, mask=in_win)
        tl.debug_barrier()  # the node's window is visible to its children in the next iterations


def conv1d_tree(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, rf, key,
                activation: str = "silu", out: torch.Tensor | None = None, block_c: int = 128) -> torch.Tensor:
    """x [B, T, C] -> y [B, T, C]; weight [C, 1, K] (or [C, K]); writes every node's window into
    rf.store.scratch[key] (rf: a RecurrentForward)."""
    B, T, C = x.shape
    w = weight.reshape(C, -1).contiguous()
    K = w.shape[1]
    committed, scratch = rf.store.committed[key], rf.store.scratch[key]
    if committed.shape[1:] != (C, K - 1) or committed.dtype != x.dtype:
        raise ValueError(f"conv state {tuple(committed.shape[1:])} {committed.dtype} does not fit x {tuple(x.shape)} "
                         f"{x.dtype} with kernel {K}")
    x = x if x.stride(-1) == 1 else x.contiguous()
    out = torch.empty_like(x) if out is None else out
    if B == 0 or T == 0:
        return out
    block = min(block_c, triton.next_power_of_2(C))
    _conv1d_tree_kernel[(B, triton.cdiv(C, block))](
        x, w, bias if bias is not None else w, out, committed, scratch,
        rf.slots.contiguous(), rf.store.base, rf.nodes.contiguous(), rf.parents.contiguous(),
        T, C, rf.store.nodes, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        K=K, KP=max(triton.next_power_of_2(max(K - 1, 1)), 1), BLOCK_C=block, HAS_BIAS=bias is not None,
        SILU=activation == "silu", num_warps=4,
    )
    return out
