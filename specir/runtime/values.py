"""Runtime values of the decode step's typed SSA values (one entry per active request)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ChainDraft:
    """`tokens`: drafted tokens per request (possibly none). `q`: the draft distributions the
    tokens were sampled from ([k, V] per request), or None where drafting was deterministic."""

    tokens: list[list[int]]
    q: list[torch.Tensor | None]


@dataclass
class TreeDraft:
    """Per request: node tokens and parents, node 0 being the pending token (parent -1).
    Parents precede children, so node indices ascend along every path."""

    tokens: list[list[int]]
    parents: list[list[int]]

    def depths(self, b: int) -> list[int]:
        out = []
        for p in self.parents[b]:
            out.append(0 if p < 0 else out[p] + 1)
        return out


@dataclass
class Verified:
    """Target logits [B, T, V] over each request's nodes (node 0 = pending token)."""

    logits: torch.Tensor
    tokens: list[list[int]]
    parents: list[list[int]]


@dataclass
class Accepted:
    """Per request: the accepted node path (starting at node 0) and the tokens the step emits
    (the accepted drafted tokens, then the bonus)."""

    paths: list[list[int]]
    emitted: list[list[int]]
