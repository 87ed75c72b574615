"""Acceptance rules. Both are lossless: greedy returns exactly the target's argmax path; sampling
returns tokens distributed exactly as the target's (temperature-scaled) distribution.

Greedy (chain and tree): node t > 0 is accepted iff its parent is accepted and its token is the
target's argmax after the parent; the bonus is the argmax after the last accepted node.

Sampling, chain drafted by sampling from q: standard speculative sampling: accept d_i with
probability min(1, p(d_i) / q(d_i)); on rejection draw from norm(max(0, p - q)).
Sampling over deterministic candidates (trees, n-gram chains, greedy drafts): at an accepted
node, test its children in order against the residual r (initially p): accept child c with
probability r(c); otherwise zero r(c), renormalise and try the next; if none is accepted, the
bonus is drawn from r. Each test draws from the current residual, so the emitted token has law p.
"""
from __future__ import annotations

import torch

from .values import Accepted


def _children(parents: list[int]) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for t, p in enumerate(parents):
        if p >= 0:
            kids.setdefault(p, []).append(t)
    return kids


def greedy(logits: torch.Tensor, tokens: list[list[int]], parents: list[list[int]]) -> Accepted:
    """logits [B, T, V]."""
    target = logits.argmax(-1).tolist()
    paths, emitted = [], []
    for b, (toks, pars) in enumerate(zip(tokens, parents)):
        kids = _children(pars)
        path, node = [0], 0
        while True:
            nxt = next((c for c in kids.get(node, []) if toks[c] == target[b][node]), None)
            if nxt is None:
                break
            path.append(nxt)
            node = nxt
        paths.append(path)
        emitted.append([toks[c] for c in path[1:]] + [target[b][node]])
    return Accepted(paths, emitted)


def _sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    return int(torch.multinomial(probs, 1, generator=generator))


def _uniform(generator: torch.Generator) -> float:
    return float(torch.rand((), generator=generator))


def sample(logits: torch.Tensor, tokens: list[list[int]], parents: list[list[int]], temperature: float,
           generator: torch.Generator, q: list[torch.Tensor | None] | None = None) -> Accepted:
    """Lossless speculative sampling; `q[b]` ([k, V]) marks a chain sampled from q."""
    if temperature <= 0:
        return greedy(logits, tokens, parents)
    probs = torch.softmax(logits.float().cpu() / temperature, dim=-1)
    paths, emitted = [], []
    for b, (toks, pars) in enumerate(zip(tokens, parents)):
        qb = q[b] if q is not None else None
        if qb is not None:
            path, out = _chain_from_q(probs[b], toks, qb.float().cpu(), generator)
        else:
            path, out = _deterministic(probs[b], toks, pars, generator)
        paths.append(path)
        emitted.append(out)
    return Accepted(paths, emitted)


def _chain_from_q(p: torch.Tensor, toks: list[int], q: torch.Tensor, generator) -> tuple[list[int], list[int]]:
    path, out = [0], []
    for i in range(1, len(toks)):
        d = toks[i]
        ratio = float(p[i - 1, d]) / max(float(q[i - 1, d]), 1e-30)
        if _uniform(generator) < min(1.0, ratio):
            path.append(i)
            out.append(d)
            continue
        residual = (p[i - 1] - q[i - 1]).clamp_min(0)
        if float(residual.sum()) <= 0:
            residual = p[i - 1]
        out.append(_sample(residual / residual.sum(), generator))
        return path, out
    out.append(_sample(p[len(toks) - 1], generator))
    return path, out


def _deterministic(p: torch.Tensor, toks: list[int], parents: list[int], generator) -> tuple[list[int], list[int]]:
    kids = _children(parents)
    path, out, node = [0], [], 0
    while True:
        residual = p[node].clone()
        chosen = None
        for c in kids.get(node, []):
            total = float(residual.sum())
            if total <= 0:
                break
            if _uniform(generator) < float(residual[toks[c]]) / total:
                chosen = c
                break
            residual[toks[c]] = 0.0
        if chosen is None:
            if float(residual.sum()) <= 0:
                residual = p[node]
            out.append(_sample(residual / residual.sum(), generator))
            return path, out
        path.append(chosen)
        out.append(toks[chosen])
        node = chosen
