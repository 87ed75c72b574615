"""The decode step's typed values, as batched tensors (B requests, fixed shapes, device-resident).

- `Draft` (IR type `tokens`): drafted chains: tokens [B, K] int64, count [B] int32 valid per request
  (the rest is padding), optional q [B, K, V] float32 (the draft distribution each token was
  sampled from; None where drafting was deterministic), optional score [B, K] float32 (the draft's
  cumulative log-probability of each token's prefix: its confidence; None where unknown).
- `Nodes` (IR type `tree`, and what every verify runs over): node 0 is the pending token; tokens
  [B, N] int64, parents [B, N] int32 (-1 for node 0), depths [B, N] int64, valid [B, N] bool,
  mask [B, N, N] bool ancestor mask (None: a chain, causal), q as for Draft but per node (q[:, 0]
  unused). Parents precede children. `max_depth`/`max_children` are static bounds (Python ints).
  Optional score [B, N] float32: the draft's cumulative log-probability of node n's path (node 0:
  0.0; a child never scores above its parent); None where the drafter gives none.
  Per-request sizes are ragged: `valid` says which nodes a request has; `specir.step.ragged` packs
  the valid nodes of the live requests into one token list with cumulative offsets.
- `Verified` (IR type `logits`): logits [B, N, V] of `model` over `nodes`.
- `Accepted` (IR type `accepted`): path [B, N] int32 (accepted node indices from node 0; -1 after),
  n_path [B] int32 (accepted drafted tokens + 1), emitted [B, N] int64 (the accepted drafted tokens,
  then the bonus token; 0 after), n_emit [B] int32 (= n_path), and `model`, the verifier whose
  cache the path's rows belong to.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Draft:
    tokens: torch.Tensor
    count: torch.Tensor
    q: torch.Tensor | None = None
    score: torch.Tensor | None = None


@dataclass
class Nodes:
    tokens: torch.Tensor
    parents: torch.Tensor
    depths: torch.Tensor
    valid: torch.Tensor
    mask: torch.Tensor | None = None
    q: torch.Tensor | None = None
    max_depth: int = 0  # static bounds of the tree's shape (0: unknown, take width - 1)
    max_children: int = 0
    score: torch.Tensor | None = None

    @property
    def width(self) -> int:
        return self.tokens.shape[1]

    @classmethod
    def chain(cls, pending: torch.Tensor, draft: Draft | None) -> "Nodes":
        """[pending | drafted tokens] with parents t - 1; padding past each request's count is invalid."""
        B = pending.shape[0]
        dev = pending.device
        if draft is None or draft.tokens.shape[1] == 0:
            tokens = pending[:, None].clone()
            q = score = None
        else:
            tokens = torch.cat([pending[:, None], draft.tokens], dim=1)
            q = None if draft.q is None else torch.cat([torch.zeros_like(draft.q[:, :1]), draft.q], dim=1)
            score = None if draft.score is None else torch.cat([torch.zeros_like(draft.score[:, :1]), draft.score], 1)
        N = tokens.shape[1]
        arange = torch.arange(N, device=dev)
        count = torch.zeros(B, dtype=torch.int32, device=dev) if draft is None else draft.count
        valid = arange[None, :] <= count[:, None].long()
        parents = (arange - 1).to(torch.int32)[None, :].expand(B, N)
        depths = arange[None, :].expand(B, N)
        return cls(tokens, parents, depths, valid, None, q, max_depth=N - 1, max_children=1, score=score)


@dataclass
class Verified:
    logits: torch.Tensor
    nodes: Nodes
    model: str


@dataclass
class Accepted:
    path: torch.Tensor
    n_path: torch.Tensor
    emitted: torch.Tensor
    n_emit: torch.Tensor
    model: str
