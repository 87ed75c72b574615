"""Static EAGLE-2-style token trees built on the device (the draft.tree op, expand = "static").

Same expansion as specir.runtime.drafting.draft_tree, in fixed shapes: the root proposes its
`topk` best tokens (candidates 0..K-1, score = draft log-probability); each further level feeds
the K best candidates of the previous level (by cumulative score, earlier candidate first on
ties) to the drafter in one forward, each proposing its K best children (candidate ids in
creation order: frontier position, then child rank). The tree keeps the `budget` best candidates
overall (score, then creation order), listed in creation order after node 0 (the pending
token); a child's score never exceeds its parent's, so every kept node's parent is kept. Ties
between equal draft log-probabilities may order differently from the host drafter; any tree is
verified by the target, so outputs do not depend on it.

`TreeDrafter.level_inputs(...)`/`propose(...)` are torch ops on device tensors (no host read),
so the step that uses them can be captured into a CUDA graph.
"""
from __future__ import annotations

import torch


class TreeDrafter:
    def __init__(self, B: int, depth: int, topk: int, budget: int, device):
        K = topk
        self.B, self.depth, self.K = B, depth, K
        self.C = K + (depth - 1) * K * K
        self.N = min(budget, self.C)
        self.U = max((depth - 1) * K, 1)  # mask width of the level forwards
        z = lambda *shape, dtype: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        self.score = z(B, self.C, dtype=torch.float32)
        self.token = z(B, self.C, dtype=torch.long)
        self.parent = z(B, self.C, dtype=torch.long)       # candidate id, -1 for the root's children
        self.cand_depth = z(B, self.C, dtype=torch.long)
        self.fed_row = z(B, self.C, dtype=torch.long)       # scratch row (relative) where it was fed
        self.row_mask = z(B, self.U, self.U, dtype=torch.bool)  # visibility of each fed row
        self.frontier = z(B, K, dtype=torch.long)
        self.arange_k = torch.arange(K, device=device)
        self.eye_k = torch.eye(K, dtype=torch.bool, device=device)
        self.node_numbers = torch.arange(1, self.N + 1, device=device)[None, :].expand(B, self.N).contiguous()
        self.eye_n = torch.eye(self.N + 1, dtype=torch.bool, device=device)[None].expand(B, -1, -1).contiguous()

    # ------------------------------------------------------------------ expansion
    def root(self, logits: torch.Tensor) -> None:
        """logits [B, V] after the pending token: candidates 0..K-1."""
        logp = torch.log_softmax(logits.float(), dim=-1)
        vals, toks = torch.topk(logp, self.K, dim=-1)
        K = self.K
        self.score[:, :K] = vals
        self.token[:, :K] = toks
        self.parent[:, :K] = -1
        self.cand_depth[:, :K] = 1
        self.frontier.copy_(self.arange_k[None, :].expand(self.B, K))

    def level_inputs(self, level: int, ids: torch.Tensor, mask: torch.Tensor) -> None:
        """Fill the level forward's ids [B, K] and mask [B, K, U] for level >= 1 (the frontier
        fed at scratch rows (level-1)*K + t)."""
        K, first = self.K, (level - 1) * self.K
        f = self.frontier
        ids.copy_(self.token.gather(1, f))
        parent = self.parent.gather(1, f)                                    # [B, K]
        parent_row = self.fed_row.gather(1, parent.clamp(min=0))             # [B, K]
        inherited = self.row_mask.gather(1, parent_row[:, :, None].expand(-1, -1, self.U))
        rows = inherited & (parent >= 0)[:, :, None]
        rows[:, :, first:first + K] |= self.eye_k
        mask.copy_(rows)
        self.row_mask[:, first:first + K] = rows
        self.fed_row.scatter_(1, f, self.arange_k[None, :].expand(self.B, K) + first)

    def propose(self, level: int, logits: torch.Tensor) -> None:
        """logits [B, K, V] of the frontier fed at `level`: add its children, pick the next frontier."""
        K = self.K
        logp = torch.log_softmax(logits.float(), dim=-1)
        vals, toks = torch.topk(logp, K, dim=-1)                             # [B, K, K]
        base = K + (level - 1) * K * K
        parent_score = self.score.gather(1, self.frontier)                   # [B, K]
        scores = (parent_score[:, :, None] + vals).reshape(self.B, K * K)
        self.score[:, base:base + K * K] = scores
        self.token[:, base:base + K * K] = toks.reshape(self.B, K * K)
        self.parent[:, base:base + K * K] = self.frontier[:, :, None].expand(-1, -1, K).reshape(self.B, K * K)
        self.cand_depth[:, base:base + K * K] = level + 1
        order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :K]
        self.frontier.copy_(order + base)

    # ------------------------------------------------------------------ the tree
    def tree(self, pending: torch.Tensor, ids: torch.Tensor, parents: torch.Tensor, depths: torch.Tensor,
             mask: torch.Tensor) -> None:
        """Write the verify inputs: ids [B, N+1] (node 0 = pending), parents [B, N+1] int32
        (-1 for node 0), node depths [B, N+1] and the ancestor mask [B, N+1, N+1]."""
        chosen = torch.sort(self.score, dim=1, descending=True, stable=True).indices[:, :self.N]
        chosen = torch.sort(chosen, dim=1).values                            # creation order
        node_of = torch.zeros_like(self.parent)
        node_of.scatter_(1, chosen, self.node_numbers)
        cand_parent = self.parent.gather(1, chosen)
        parent_node = torch.where(cand_parent >= 0, node_of.gather(1, cand_parent.clamp(min=0)), 0)
        ids[:, 0] = pending
        ids[:, 1:] = self.token.gather(1, chosen)
        parents[:, 0] = -1
        parents[:, 1:] = parent_node
        depths[:, 0] = 0
        depths[:, 1:] = self.cand_depth.gather(1, chosen)
        up = parents.long().clamp(min=0)[:, :, None].expand(-1, -1, self.N + 1)
        anc = self.eye_n.clone()
        for _ in range(self.depth):
            anc = self.eye_n | anc.gather(1, up)
        mask.copy_(anc)
