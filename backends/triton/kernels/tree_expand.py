"""One level of draft.tree's expansion in one launch (TreeState.expand, specir/step/ops/draft_tree.py):
the level's candidates, the new frontier and the next level's forward inputs.

One program per request. Level 0 (ROOT): the root's K ranked children become candidates 0..K-1
(score = log-probability, parent -1, depth 1) and the frontier is 0..K-1. Level L >= 1: the K x K
children of the frontier become candidates base .. base + K^2 - 1 (frontier position, then child
rank; score = the parent's score + the child's log-probability; parent = the frontier's candidate;
depth L + 1) and the new frontier is the K best of them by score, the earlier candidate first among
equals (torch.sort's stable order). A score below `log_min` (dynamic expansion) is -inf. With FEED,
the next level's inputs: ids = the frontier's tokens, a tree mask row per frontier node (its parent's
fed row plus itself at row first + t), kept in the tree's row table, each frontier node's fed row,
offsets = first and positions = lens + level. Written for the same tables torch writes (tested
table for table against TreeState under the interpreter); torch runs a tree past MAX_K children.
Replaces about twenty gathers, scatters, copies and a sort per level."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_K = 64  # K x K candidates in one program's registers


@triton.jit
def _tree_expand_kernel(vals_ptr, toks_ptr, score_ptr, token_ptr, parent_ptr, depth_ptr, fed_ptr, row_mask_ptr,
                        frontier_ptr, ids_ptr, mask_ptr, offsets_ptr, pos_ptr, lens_ptr,
                        C, U, level, base, first, log_min,
                        K: tl.constexpr, KP: tl.constexpr, UP: tl.constexpr, ROOT: tl.constexpr,
                        FEED: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, KP)[:, None]  # frontier position (the parent)
    j = tl.arange(0, KP)[None, :]  # child rank
    slot = tl.arange(0, KP)
    if ROOT:
        ok = (i == 0) & (j < K)
        n = j + 0 * i
        v = tl.load(vals_ptr + b * K + n, mask=ok, other=float("-inf"))
        t = tl.load(toks_ptr + b * K + n, mask=ok, other=0)
        s = v
        par = tl.full([KP, KP], -1, tl.int64)
    else:
        ok = (i < K) & (j < K)
        n = i * K + j
        f_old = tl.load(frontier_ptr + b * K + i, mask=i < K, other=0)
        prev = tl.load(score_ptr + b * C + f_old, mask=i < K, other=float("-inf"))
        v = tl.load(vals_ptr + b * K * K + n, mask=ok, other=float("-inf"))
        t = tl.load(toks_ptr + b * K * K + n, mask=ok, other=0)
        s = prev + v
        par = f_old + 0 * j
    s = tl.where(s >= log_min, s, float("-inf"))
    cand = b * C + base + n
    tl.store(score_ptr + cand, s, mask=ok)
    tl.store(token_ptr + cand, t, mask=ok)
    tl.store(parent_ptr + cand, par, mask=ok)
    tl.store(depth_ptr + cand, tl.full([KP, KP], 0, tl.int64) + level + 1, mask=ok)
    # the new frontier: slot r holds the r-th best candidate (lowest number among equal scores)
    if ROOT:
        pick = slot
    else:
        pick = tl.full([KP], 0, tl.int32)
        free = ok
        for r in range(K):
            best = tl.max(tl.max(tl.where(free, s, float("-inf")), 1), 0)
            first_n = tl.min(tl.min(tl.where(free & (s == best), n, 2147483647), 1), 0)
            pick = tl.where(slot == r, first_n, pick)
            free = free & (n != first_n)
    live = slot < K
    if FEED:
        if ROOT:
            new_tok = tl.load(toks_ptr + b * K + pick, mask=live, other=0)
            new_par = tl.full([KP], -1, tl.int64)
        else:
            new_tok = tl.load(toks_ptr + b * K * K + pick, mask=live, other=0)
            new_par = tl.load(frontier_ptr + b * K + pick // K, mask=live, other=-1)
        has_par = new_par >= 0
        par_row = tl.load(fed_ptr + b * C + new_par, mask=live & has_par, other=0)
        u = tl.arange(0, UP)[None, :]
        inherited = tl.load(row_mask_ptr + b * U * U + par_row[:, None] * U + u,
                            mask=live[:, None] & has_par[:, None] & (u < U), other=0)
        rows = (inherited != 0) | (u == first + slot[:, None])
        row_ok = live[:, None] & (u < U)
        tl.debug_barrier()  # every read of the frontier and the fed rows above precedes the writes below
        tl.store(ids_ptr + b * K + slot, new_tok, mask=live)
        tl.store(mask_ptr + b * K * U + slot[:, None] * U + u, rows, mask=row_ok)
        tl.store(row_mask_ptr + b * U * U + (first + slot[:, None]) * U + u, rows, mask=row_ok)
        tl.store(fed_ptr + b * C + base + pick, (first + slot).to(tl.int64), mask=live)
        tl.store(offsets_ptr + b, first)
        lens = tl.load(lens_ptr + b).to(tl.int64)
        tl.store(pos_ptr + b * K + slot, lens + level + 0 * slot, mask=live)
    else:
        tl.debug_barrier()
    tl.store(frontier_ptr + b * K + slot, (base + pick).to(tl.int64), mask=live)


def fits(tree) -> bool:
    """Whether this kernel expands `tree` (else TreeState.expand, in torch)."""
    return tree.K <= MAX_K


def expand_tree(tree, level: int, vals: torch.Tensor, toks: torch.Tensor, feed) -> None:
    """TreeState.expand(level, vals, toks, feed) in one launch (fits(tree) must hold)."""
    K = tree.K
    for name in tree.TABLES:
        if not getattr(tree, name).is_contiguous():
            raise ValueError(f"the tree's {name} table must be contiguous")
    vals, toks = vals.contiguous(), toks.contiguous()
    if feed is not None:
        for name in ("ids", "mask", "pos"):
            if not getattr(feed, name).is_contiguous():
                raise ValueError(f"the level forward's {name} must be contiguous")
        ids, mask, offsets, pos, lens = feed.ids, feed.mask, feed.offsets, feed.pos, feed.lens
    else:  # unused pointers (FEED off)
        ids = mask = offsets = pos = lens = tree.frontier
    _tree_expand_kernel[(tree.B,)](
        vals, toks, tree.score, tree.token, tree.parent, tree.cand_depth, tree.fed_row, tree.row_mask, tree.frontier,
        ids, mask, offsets, pos, lens, tree.C, tree.U, level, tree.base(level), level * K,
        float(tree.log_min), K=K, KP=triton.next_power_of_2(K), UP=triton.next_power_of_2(tree.U),
        ROOT=level == 0, FEED=feed is not None, num_warps=4 if K <= 16 else 8)
