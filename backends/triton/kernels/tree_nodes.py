"""draft.tree's drafted nodes in two launches (TreeState.nodes, specir/step/ops/draft_tree.py).

Two launches. Ranks, grid (requests, candidate blocks of RANK_ROWS): a candidate's rank is its place
in the stable descending order of the scores (the candidates scoring more, and the earlier ones
scoring the same). Nodes, one program per request: the N of rank below N
are kept and numbered 1..N in creation order (node 0 is the pending token). Each node gets its
candidate's token, depth and score, its parent's node number (0 for the root's children, and for a
parent not kept, as torch's zero-filled table gives), valid = score > -inf; node 0 has parent -1,
depth 0, score 0; the nodes past N (a narrower tree of a wider op) are invalid children of node 0
at depth 1 with token 0 and score -inf. The ancestor mask row of node p holds p and its ancestors
up to the tree's depth. Written for the values torch's nodes() gives (tested against it under the
interpreter); torch lists trees past MAX_CANDIDATES candidates or MAX_WIDTH nodes.
Replaces two sorts, a scatter, about a dozen gathers and concatenations and two launches per level
of the ancestor mask. The ranks run apart over many programs: ranked in the one program per request, the
[C, C] comparison took 89 us a step on an H100 at depth 10 (584 candidates), 0.9 % of the step."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specir.step.values import Nodes

MAX_CANDIDATES = 4096
MAX_WIDTH = 256  # nodes + 1: the ancestor mask tile of one program
RANK_ROWS = 64   # candidates one rank program ranks
RANK_BLOCK = 64  # candidates they are compared with per iteration: a [RANK_ROWS, RANK_BLOCK] tile


@triton.jit
def _finite_or_low(s):
    return tl.where(s == s, s, float("-inf"))  # NaN as -inf (TreeState never stores one; a hand-filled table may)


@triton.jit
def _tree_ranks_kernel(score_ptr, rank_ptr, C, BI: tl.constexpr, BJ: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BI + tl.arange(0, BI)
    s = _finite_or_low(tl.load(score_ptr + b * C + c, mask=c < C, other=float("-inf")))
    rank = tl.zeros([BI], tl.int32)
    for j0 in range(0, C, BJ):
        j = j0 + tl.arange(0, BJ)
        sj = _finite_or_low(tl.load(score_ptr + b * C + j, mask=j < C, other=float("-inf")))
        ahead = (sj[None, :] > s[:, None]) | ((sj[None, :] == s[:, None]) & (j[None, :] < c[:, None]))
        rank += tl.sum((ahead & (j[None, :] < C)).to(tl.int32), 1)
    tl.store(rank_ptr + b * C + c, rank, mask=c < C)


@triton.jit
def _tree_nodes_kernel(score_ptr, rank_ptr, token_ptr, parent_ptr, depth_ptr, pending_ptr, node_of_ptr,
                       tokens_ptr, parents_ptr, depths_ptr, valid_ptr, nscore_ptr, anc_ptr,
                       C, N, W1,
                       CP: tl.constexpr, WP: tl.constexpr, DEPTH: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, CP)
    real = c < C
    s = _finite_or_low(tl.load(score_ptr + b * C + c, mask=real, other=float("-inf")))
    rank = tl.load(rank_ptr + b * C + c, mask=real, other=C)
    kept = real & (rank < N)
    number = tl.cumsum(kept.to(tl.int32), 0)  # 1..N over the kept, in creation order
    kept = kept & (number <= N)  # ranks are distinct, so this never drops one: a guard on the row's end
    tl.store(node_of_ptr + b * C + c, tl.where(kept, number, 0), mask=real)
    tl.debug_barrier()  # node_of complete before any parent looks itself up
    par = tl.load(parent_ptr + b * C + c, mask=kept, other=-1)
    par_node = tl.load(node_of_ptr + b * C + par, mask=kept & (par >= 0), other=0)
    out = b * W1 + number
    tl.store(tokens_ptr + out, tl.load(token_ptr + b * C + c, mask=kept, other=0), mask=kept)
    tl.store(parents_ptr + out, par_node, mask=kept)
    tl.store(depths_ptr + out, tl.load(depth_ptr + b * C + c, mask=kept, other=0), mask=kept)
    tl.store(valid_ptr + out, (s > float("-inf")).to(tl.int1), mask=kept)
    tl.store(nscore_ptr + out, s, mask=kept)
    p = tl.arange(0, WP)
    root, pad = p == 0, (p > N) & (p < W1)
    tl.store(tokens_ptr + b * W1 + p, tl.where(root, tl.load(pending_ptr + b), 0), mask=root | pad)
    tl.store(parents_ptr + b * W1 + p, tl.where(root, -1, 0), mask=root | pad)
    tl.store(depths_ptr + b * W1 + p, tl.where(root, 0, 1).to(tl.int64), mask=root | pad)
    tl.store(valid_ptr + b * W1 + p, root, mask=root | pad)
    tl.store(nscore_ptr + b * W1 + p, tl.where(root, 0.0, float("-inf")), mask=root | pad)
    tl.debug_barrier()  # every node's parent written before the ancestor walk reads them
    q = tl.arange(0, WP)[None, :]
    node = p
    anc = q == node[:, None]
    for _ in range(DEPTH):
        up = tl.load(parents_ptr + b * W1 + node, mask=p < W1, other=0)
        node = tl.maximum(up, 0)
        anc = anc | (q == node[:, None])
    tl.store(anc_ptr + b * W1 * W1 + p[:, None] * W1 + q, anc, mask=(p[:, None] < W1) & (q < W1))


def fits(tree) -> bool:
    """Whether this kernel lists `tree`'s nodes (else TreeState.nodes, in torch)."""
    return tree.C <= MAX_CANDIDATES and tree.width + 1 <= MAX_WIDTH


def tree_nodes(tree, pending: torch.Tensor) -> Nodes:
    """TreeState.nodes(pending) in two launches (fits(tree) must hold)."""
    B, W1, dev = tree.B, tree.width + 1, tree.score.device
    tokens = torch.empty(B, W1, dtype=torch.long, device=dev)
    parents = torch.empty(B, W1, dtype=torch.int32, device=dev)
    depths = torch.empty(B, W1, dtype=torch.long, device=dev)
    valid = torch.empty(B, W1, dtype=torch.bool, device=dev)
    score = torch.empty(B, W1, dtype=torch.float32, device=dev)
    anc = torch.empty(B, W1, W1, dtype=torch.bool, device=dev)
    node_of = torch.empty(B, tree.C, dtype=torch.int32, device=dev)
    rank = torch.empty(B, tree.C, dtype=torch.int32, device=dev)
    _tree_ranks_kernel[(B, triton.cdiv(tree.C, RANK_ROWS))](tree.score, rank, tree.C, BI=RANK_ROWS, BJ=RANK_BLOCK,
                                                            num_warps=4)
    _tree_nodes_kernel[(B,)](tree.score, rank, tree.token, tree.parent, tree.cand_depth, pending.contiguous(), node_of,
                             tokens, parents, depths, valid, score, anc, tree.C, tree.N, W1,
                             CP=triton.next_power_of_2(tree.C), WP=triton.next_power_of_2(W1),
                             DEPTH=tree.depth, num_warps=8)
    return Nodes(tokens, parents, depths, valid, anc, max_depth=tree.depth, max_children=tree.K, score=score)
