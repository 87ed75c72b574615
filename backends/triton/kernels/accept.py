"""Greedy acceptance over a token tree, on the device (KERNEL_CONTRACTS.md, "Greedy acceptance").

Node 0 (the pending token) is always accepted; node t > 0 is accepted iff 0 <= parent[t] < t,
its parent is accepted and token[t] == target[parent[t]]. A node whose parent is out of that
range (e.g. -1 on padding nodes) is never accepted. The accepted path is the ancestry of the
deepest accepted node (ties: lowest index), listed from node 0.

One program per request, no loop over the tree: pointer jumping (log2 T rounds of gathers)
gives every node its depth and whether its whole ancestry matches; a second jumping pass walks
each path position j up from the chosen leaf by the bits of (depth - j).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _greedy_accept_tree_kernel(
    tokens_ptr, parents_ptr, target_ptr, acc_idx_ptr, n_acc_ptr, bonus_ptr, emitted_ptr,
    stride_tok, stride_par, stride_tgt, stride_acc, stride_emit,
    T, BLOCK_T: tl.constexpr, LOG_T: tl.constexpr, HAS_EMITTED: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    node = tl.arange(0, BLOCK_T)
    real = node < T
    parent = tl.load(parents_ptr + b * stride_par + node, mask=real, other=-1).to(tl.int32)
    token = tl.load(tokens_ptr + b * stride_tok + node, mask=real, other=0)
    target = tl.load(target_ptr + b * stride_tgt + node, mask=real, other=0)
    has_parent = real & (parent >= 0) & (parent < node)
    parent = tl.where(has_parent, parent, 0)                       # root (or invalid) -> 0
    matches = has_parent & (token.to(tl.int64) == tl.gather(target, parent, 0).to(tl.int64))
    good = (matches | (node == 0)).to(tl.int32)                    # whole ancestry matches
    depth = tl.where(node == 0, 0, 1)
    jump = parent
    for _ in tl.static_range(LOG_T):
        good = good & tl.gather(good, jump, 0)
        depth = depth + tl.gather(depth, jump, 0)
        jump = tl.gather(jump, jump, 0)
    # deepest accepted node, lowest index on ties
    score = tl.where(good != 0, depth * BLOCK_T + (BLOCK_T - 1 - node), -1)
    best = tl.max(score, 0)
    last = BLOCK_T - 1 - best % BLOCK_T
    last_depth = best // BLOCK_T
    # path[j] = ancestor of `last` at distance last_depth - j, for j <= last_depth
    up = tl.maximum(last_depth - node, 0)
    path = tl.zeros([BLOCK_T], tl.int32) + last
    jump = parent
    for k in tl.static_range(LOG_T):
        path = tl.where(((up >> k) & 1) != 0, tl.gather(jump, path, 0), path)
        jump = tl.gather(jump, jump, 0)
    on_path = node <= last_depth
    tl.store(acc_idx_ptr + b * stride_acc + node, tl.where(on_path, path, -1), mask=real)
    tl.store(n_acc_ptr + b, last_depth + 1)
    bonus = tl.sum(tl.where(node == last, target, 0), 0)
    tl.store(bonus_ptr + b, bonus)
    if HAS_EMITTED:
        next_node = tl.gather(path, tl.minimum(node + 1, BLOCK_T - 1), 0)
        drafted = tl.gather(token, next_node, 0)
        emitted = tl.where(node < last_depth, drafted, tl.where(node == last_depth, bonus, -1))
        tl.store(emitted_ptr + b * stride_emit + node, emitted.to(emitted_ptr.dtype.element_ty), mask=real)


def greedy_accept_tree(tokens, parents, target_argmax, *, acc_idx=None, n_acc=None, bonus=None, emitted=None):
    """tokens, parents, target_argmax: [B, T] ints -> (acc_idx [B, T] int32, -1 past n_acc;
    n_acc [B] int32; bonus [B] in target's dtype).

    Pass `emitted` ([B, T], tokens' dtype) to also get the tokens the step emits: the accepted
    drafted tokens then the bonus (n_acc of them), -1 after. Outputs may be preallocated."""
    B, T = tokens.shape
    if parents.shape != (B, T) or target_argmax.shape != (B, T):
        raise ValueError("tokens, parents and target_argmax must all be [B, T]")
    for name, x in (("tokens", tokens), ("parents", parents), ("target_argmax", target_argmax)):
        if x.stride(-1) != 1:
            raise ValueError(f"{name} needs a contiguous last dim")
    dev = tokens.device
    acc_idx = torch.empty(B, T, dtype=torch.int32, device=dev) if acc_idx is None else acc_idx
    n_acc = torch.empty(B, dtype=torch.int32, device=dev) if n_acc is None else n_acc
    bonus = torch.empty(B, dtype=target_argmax.dtype, device=dev) if bonus is None else bonus
    if B == 0:
        return acc_idx, n_acc, bonus
    block_t = max(16, triton.next_power_of_2(T))
    _greedy_accept_tree_kernel[(B,)](
        tokens, parents, target_argmax, acc_idx, n_acc, bonus, acc_idx if emitted is None else emitted,
        tokens.stride(0), parents.stride(0), target_argmax.stride(0), acc_idx.stride(0),
        0 if emitted is None else emitted.stride(0),
        T, BLOCK_T=block_t, LOG_T=max(1, (block_t - 1).bit_length()), HAS_EMITTED=emitted is not None,
        num_warps=4,
    )
    return acc_idx, n_acc, bonus
