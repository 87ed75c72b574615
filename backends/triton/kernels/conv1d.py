"""Causal depthwise conv1d with per-node state: decode step (T = 1), chain verify and tree verify
in one kernel (the `conv1d` op of specir/ir/ops_recurrent.py; reference:
backends/reference/recurrent.py:conv1d).

State layout (specir/runtime/recurrent_state.py): committed [slots, C, K-1] and a scratch ring
[slots, nodes, C, K-1] in the activation dtype; token t of request b is node nodes[b, t] at ring
position (base[slot] + node) % nodes and starts from the window of parents[b, t] (-1: the
committed window). Which variant runs (tree_paths.replays_paths, as for gated_delta.py):
- walk (chains, decode, forwards longer than the ring): one program per (request, block of
  channels) walks the tokens in order (a parent precedes its children), reading the parent's
  window from memory, writing the node's;
- PATHS (a tree that fits the ring): one program per (request x node, block of channels)
  gathers the node's window from the window before its path and the inputs of its ancestors
  (RecurrentForward.paths); no program reads another's output, so the serial walk is gone.
Both compute y with `_conv_out` over the same window values (bit-identical under the
interpreter; compiled, they may reduce the window in another order: fp32 rounding, seen on an
H200, as gated_delta.py's two variants; the windows written are copies, equal either way): fp32
accumulation, the sum rounded once to the activation dtype, then silu (as F.conv1d + silu).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._numerics import round_to
from ._state_ring import load_state
from .tree_paths import replays_paths


@triton.jit
def _conv_out(win, w_win, xt, w_new, bias, act_dtype: tl.constexpr, SILU: tl.constexpr):
    """y of one token: `win` [BLOCK_C, KP] the window before it (fp32), xt [BLOCK_C] its input."""
    y = round_to(tl.sum(win * w_win, axis=1) + xt.to(tl.float32) * w_new + bias, act_dtype)
    if SILU:
        yf = y.to(tl.float32)
        y = round_to(yf / (1.0 + tl.exp(-yf)), act_dtype)
    return y


@triton.jit
def _path_window(off, start, path, x_row, stride_xt, committed, scratch_ptr, slot, base, W, per_node, c, j,
                 in_c, K: tl.constexpr):
    """Entries off + j (j < K - 1) of the sequence (the window of `start`) ++ x[path[0]], x[path[1]], ...:
    the window before the path's token off - (K - 2) (off = depth - 1: before the node; off =
    depth: after it). `x_row`: the request's x; `path`: the node's path (int32 token indices)."""
    pos = off + j
    from_w = pos < K - 1
    in_j = in_c[:, None] & (j[None, :] < K - 1)
    wv = load_state(start, committed, scratch_ptr, slot, base, W, per_node,
                    c[:, None].to(tl.int64) * (K - 1) + pos[None, :], in_j & from_w[None, :])
    u = tl.load(path + (pos - (K - 1)), mask=(j < K - 1) & (pos >= K - 1), other=0).to(tl.int64)
    xv = tl.load(x_row + u[None, :] * stride_xt + c[:, None], mask=in_j & (pos >= K - 1)[None, :], other=0.0)
    return tl.where(from_w[None, :], wv, xv.to(wv.dtype))


@triton.jit
def _conv1d_tree_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, committed_ptr, scratch_ptr,
    slots_ptr, base_ptr, nodes_ptr, parents_ptr, path_ptr, depth_ptr, start_ptr,
    T, C, W, stride_xb, stride_xt, stride_ob, stride_ot,
    K: tl.constexpr, KP: tl.constexpr, BLOCK_C: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
    PATHS: tl.constexpr,
):
    """Axis 0: the request (walk) or request x node (PATHS); axis 1: the block of channels.
    PATHS: token t at depth d (path[:d], its ancestors in this forward then t) reads window
    entry j from L = (start's window) ++ x[path[:d - 1]] at L[d - 1 + j] and writes L ++ x[t]
    at d + j to its node: the same values the walk reads from its parent's node."""
    if PATHS:
        b = tl.program_id(0).to(tl.int64) // T
        tp = tl.program_id(0).to(tl.int64) % T
    else:
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
    if PATHS:
        d = tl.load(depth_ptr + b * T + tp)
        start = tl.load(start_ptr + b * T + tp).to(tl.int64)
        path = path_ptr + (b * T + tp) * T
        x_row = x_ptr + b * stride_xb
        win = _path_window(d - 1, start, path, x_row, stride_xt, committed, scratch_ptr, slot, base, W, per_node,
                           c, j, in_c, K).to(tl.float32)
        xt = tl.load(x_row + tp * stride_xt + c, mask=in_c, other=0.0)
        y = _conv_out(win, w_win, xt, w_new, bias, act_dtype, SILU)
        tl.store(out_ptr + b * stride_ob + tp * stride_ot + c, y, mask=in_c)
        new = _path_window(d, start, path, x_row, stride_xt, committed, scratch_ptr, slot, base, W, per_node,
                           c, j, in_c, K)
        node = tl.load(nodes_ptr + b * T + tp).to(tl.int64)
        tl.store(scratch_ptr + (slot * W + (base + node) % W) * per_node + idx, new, mask=in_win)
    else:
        for t in range(0, T):
            parent = tl.load(parents_ptr + b * T + t).to(tl.int64)
            node = tl.load(nodes_ptr + b * T + t).to(tl.int64)
            from_parent = scratch_ptr + (slot * W + (base + tl.maximum(parent, 0)) % W) * per_node
            here = scratch_ptr + (slot * W + (base + node) % W) * per_node
            use_c, use_s = parent < 0, parent >= 0
            win = tl.where(use_c, tl.load(committed + idx, mask=in_win & use_c, other=0.0),
                           tl.load(from_parent + idx, mask=in_win & use_s, other=0.0)).to(tl.float32)
            xt = tl.load(x_ptr + b * stride_xb + t * stride_xt + c, mask=in_c, other=0.0)
            y = _conv_out(win, w_win, xt, w_new, bias, act_dtype, SILU)
            tl.store(out_ptr + b * stride_ob + t * stride_ot + c, y, mask=in_c)
            shifted = tl.where(use_c, tl.load(committed + idx + 1, mask=shifted_ok & use_c, other=0.0),
                               tl.load(from_parent + idx + 1, mask=shifted_ok & use_s, other=0.0))
            new = tl.where(j[None, :] == K - 2, xt[:, None].to(shifted.dtype), shifted)
            tl.debug_barrier()  # every read of the parent's window precedes the write (they may alias)
            tl.store(here + idx, new, mask=in_win)
            tl.debug_barrier()  # the node's window is visible to its children in the next iterations


def conv1d_tree(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, rf, key,
                activation: str = "silu", out: torch.Tensor | None = None, block_c: int | None = None,
                paths: bool | None = None, num_warps: int = 4) -> torch.Tensor:
    """x [B, T, C] -> y [B, T, C]; weight [C, 1, K] (or [C, K]); writes every node's window into
    rf.store.scratch[key] (rf: a RecurrentForward). `paths` picks the variant (None: the PATHS
    variant where replays_paths(rf, T), else the walk; True/False forces one, for tests); `block_c` /
    `num_warps`: the launch (bench/recurrent_tree_kernels.py times them; block_c defaults to 1024 for
    PATHS, 12.1 us a launch against 19.8 at 128 at the Qwen3.5-9B shape and 65 tokens on an H100,
    session 18, and to 128 for the walk, whose programs are its only parallelism)."""
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
    paths = replays_paths(rf, T) if paths is None else paths
    block = min(block_c or (1024 if paths else 128), triton.next_power_of_2(C))
    if paths and T > rf.store.nodes:
        raise ValueError(f"PATHS needs every node of the forward in the ring ({T} nodes, ring {rf.store.nodes})")
    path, depth, start = rf.paths() if paths else (rf.parents,) * 3  # unread without PATHS
    _conv1d_tree_kernel[(B * T if paths else B, triton.cdiv(C, block))](
        x, w, bias if bias is not None else w, out, committed, scratch,
        rf.slots.contiguous(), rf.store.base, rf.nodes.contiguous(), rf.parents.contiguous(), path, depth, start,
        T, C, rf.store.nodes, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        K=K, KP=max(triton.next_power_of_2(max(K - 1, 1)), 1), BLOCK_C=block, HAS_BIAS=bias is not None,
        SILU=activation == "silu", PATHS=paths, num_warps=num_warps,
    )
    return out
