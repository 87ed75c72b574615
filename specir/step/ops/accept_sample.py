"""accept.sample [%draft,] %logits: lossless speculative (rejection) sampling; greedy at temperature 0.

Semantics per request at temperature T > 0, with p = softmax(logits / T) at each node:
- a chain drafted by sampling from q (the draft carries q): accept d_i with probability
  min(1, p_{i-1}(d_i) / q_i(d_i)) in order; at the first rejection emit a draw from
  norm(max(0, p_{i-1} - q_i)) (p_{i-1} if that is all zero); after the last valid draft, a draw from
  p at the last accepted node;
- deterministic candidates (trees, n-gram chains, greedy drafts): from node 0, test the valid
  children of the current node in index order against the residual r (initially p at the node):
  accept child c with probability r(c) / sum(r), else set r(c) = 0 and try the next; on acceptance
  move to c with r = p at c; when no child is accepted, emit a draw from r (renormalised).
Each test draws from the current residual, so every emitted token has the target's law p. Requests
at temperature 0 take greedy acceptance (accept_greedy.py). The random numbers come from the
context's counter-based stream (random.py): the same bits on every backend. Capture-safe.
"""
from __future__ import annotations

import torch

from specir.ir.opdefs import OpDef, register_op, value
from specir.ir.types import ACCEPTED
from specir.step.interfaces import StepInterfaces
from specir.step.random import sample
from specir.step.values import Accepted, Nodes

from .accept_greedy import accept_path
from .common import no_forwards, zero

STREAM = 201


def _probs(ctx, logits: torch.Tensor) -> torch.Tensor:
    t = ctx.temperature
    return torch.softmax(logits.float() / torch.where(t > 0, t, 1.0)[:, None, None], dim=-1)


def _emit(nodes: Nodes, path: torch.Tensor, n_path: torch.Tensor, drawn: torch.Tensor, model: str) -> Accepted:
    B, N = nodes.tokens.shape
    j = torch.arange(N, device=path.device)[None, :]
    path_tokens = nodes.tokens.gather(1, path.long().clamp(min=0))
    shifted = torch.cat([path_tokens[:, 1:], torch.zeros_like(path_tokens[:, :1])], dim=1)
    last = (n_path.long() - 1)[:, None]
    emitted = torch.where(j < last, shifted, torch.where(j == last, drawn[:, None], 0))
    return Accepted(path.to(torch.int32), n_path.to(torch.int32), emitted, n_path.to(torch.int32), model)


def _chain_from_q(ctx, nodes: Nodes, p: torch.Tensor, model: str) -> Accepted:
    B, N = nodes.tokens.shape
    dev = p.device
    q = nodes.q
    if q.shape[-1] < p.shape[-1]:  # a drafter of the first ids only (draft-vocab): q is 0 past them
        q = torch.nn.functional.pad(q, (0, p.shape[-1] - q.shape[-1]))
    tok = nodes.tokens[:, 1:]                                                  # [B, N-1] d_1..d_{N-1}
    p_d = p[:, :-1].gather(2, tok[:, :, None])[:, :, 0]
    q_d = q[:, 1:].gather(2, tok[:, :, None])[:, :, 0].clamp_min(1e-30)
    u = ctx.uniform((N - 1,), STREAM)
    ok = (u < (p_d / q_d).clamp(max=1.0)) & nodes.valid[:, 1:]
    n_acc = ok.long().cumprod(dim=1).sum(dim=1)                                # accepted drafts
    rejected = (n_acc + 1 < N) & nodes.valid.gather(1, (n_acc + 1).clamp(max=N - 1)[:, None])[:, 0]
    at = n_acc[:, None, None].expand(B, 1, p.shape[-1])
    p_at = p.gather(1, at)[:, 0]
    q_next = q.gather(1, (n_acc + 1).clamp(max=N - 1)[:, None, None].expand(B, 1, p.shape[-1]))[:, 0]
    residual = (p_at - q_next).clamp_min(0)
    residual = torch.where((residual.sum(-1, keepdim=True) > 0), residual, p_at)
    dist = torch.where(rejected[:, None], residual, p_at)
    drawn = sample(dist, ctx.uniform((), STREAM + 1))
    path = torch.where(torch.arange(N, device=dev)[None, :] <= n_acc[:, None], torch.arange(N, device=dev)[None, :], -1)
    return _emit(nodes, path, n_acc + 1, drawn, model)


def _children(nodes: Nodes, max_children: int) -> torch.Tensor:
    """children [B, N, C]: the valid children of each node in index order, -1 where none."""
    B, N = nodes.tokens.shape
    dev = nodes.tokens.device
    parent = torch.where(nodes.valid & (nodes.parents >= 0), nodes.parents.long(), N)   # N: no parent
    onehot = torch.nn.functional.one_hot(parent, N + 1)[:, :, :N]               # [B, t, p]
    rank = (onehot.cumsum(dim=1) * onehot).sum(-1) - 1                          # rank of t among its siblings
    out = torch.full((B, N + 1, max_children + 1), -1, dtype=torch.long, device=dev)
    col = torch.where(rank < max_children, rank, max_children).clamp(min=0)
    flat = parent * (max_children + 1) + col
    out.view(B, -1).scatter_(1, flat, torch.arange(N, device=dev)[None, :].expand(B, N))
    return out[:, :N, :max_children]


def _deterministic(ctx, nodes: Nodes, p: torch.Tensor, model: str) -> Accepted:
    B, N = nodes.tokens.shape
    dev = p.device
    levels = nodes.max_depth or N - 1
    C = max(1, min(nodes.max_children or N - 1, N - 1))
    kids = _children(nodes, C)
    u = ctx.uniform((max(levels, 1), C), STREAM + 2)
    node = torch.zeros(B, dtype=torch.long, device=dev)
    residual = p[:, 0].clone()
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    path = torch.full((B, N), -1, dtype=torch.long, device=dev)
    path[:, 0] = 0
    n_path = torch.ones(B, dtype=torch.long, device=dev)
    rows = torch.arange(B, device=dev)
    for level in range(levels):
        moved = torch.zeros(B, dtype=torch.bool, device=dev)
        for r in range(C):
            c = kids[rows, node, r]
            tok = nodes.tokens.gather(1, c.clamp(min=0)[:, None])[:, 0]
            live = (c >= 0) & ~done & ~moved
            r_tok = residual.gather(1, tok[:, None])[:, 0]
            prob = r_tok / residual.sum(-1).clamp_min(1e-30)
            acc = live & (u[:, level, r] < prob)
            residual.scatter_(1, tok[:, None], torch.where(live & ~acc, 0.0, r_tok)[:, None])
            node = torch.where(acc, c, node)
            moved = moved | acc
            at = n_path.clamp(max=N - 1)[:, None]
            path.scatter_(1, at, torch.where(acc[:, None], c[:, None], path.gather(1, at)))
            n_path = n_path + acc.long()
            p_node = p.gather(1, node[:, None, None].expand(B, 1, p.shape[-1]))[:, 0]
            residual = torch.where(acc[:, None], p_node, residual)
        done = done | ~moved
    p_node = p.gather(1, node[:, None, None].expand(B, 1, p.shape[-1]))[:, 0]
    residual = torch.where(residual.sum(-1, keepdim=True) > 0, residual, p_node)
    drawn = sample(residual, ctx.uniform((), STREAM + 3))
    return _emit(nodes, path, n_path, drawn, model)


def lower(ctx, op, args):
    verified = args[-1]
    nodes = verified.nodes
    greedy = accept_path(nodes, ctx.backend.argmax(verified.logits), verified.model)
    if not ctx.sampling:
        return greedy
    p = _probs(ctx, verified.logits)
    sampled = (_chain_from_q if nodes.q is not None else _deterministic)(ctx, nodes, p, verified.model)
    hot = (ctx.temperature > 0)
    pick = lambda a, b: torch.where(hot.view(-1, *([1] * (a.dim() - 1))), a, b)  # noqa: E731
    return Accepted(pick(sampled.path, greedy.path), pick(sampled.n_path, greedy.n_path),
                    pick(sampled.emitted, greedy.emitted), pick(sampled.n_emit, greedy.n_emit), verified.model)


register_op(OpDef(
    "accept.sample", "step", (value("draft", "tokens", "tree", optional=True), value("logits", "logits")), {},
    lambda op, ctx: ACCEPTED, doc="Lossless speculative (rejection) sampling; greedy at temperature 0.",
    role="accept",
    step=StepInterfaces(width=zero, depth=zero, forwards=no_forwards, lower=lower, effects=("accept",))))
