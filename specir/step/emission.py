"""Expected emission of a draft cut to n of its nodes, at per-token acceptance alpha.

Contract: a curve `tau` with `tau[n]` (n = 0 .. width) the expected tokens one step emits per request
when the verify keeps n of the draft's nodes (the bonus token included, so `tau[0] == 1`), under
the model that the drafter's r-th choice at a node (r = 0, 1, ...) is the target's token with
probability alpha * (1 - alpha)^r, independently along a path (alpha: the top choice's acceptance).
A node is accepted when its whole path is, so tau[n] = 1 + the sum of the kept nodes' path
probabilities. Which n nodes are kept is the `order`:
- "confidence": the n most probable (batch.budget's confidence split; a child's path probability
  never exceeds its parent's, so they are ancestor-closed);
- "listed": the first n in the order the draft lists its nodes (batch.budget's equal split).
Curves:
- `chain_emission(alpha, depth, width)`: a single path of `depth` tokens (n past the depth adds
  nothing): 1 + alpha + ... + alpha^min(n, depth), in either order. The default for draft ops that
  declare no curve.
- `tree_emission(alpha, depth, topk, width, order)`: the best-first tree draft.tree builds (each
  level expands the `topk` most probable nodes of the level before, earlier first on ties, by
  their `topk` children, `depth` levels), its `width` most probable nodes, listed in creation
  order (level, frontier position, child rank) as draft.tree lists them.
Draft ops give their curve through `StepInterfaces.emission` (specir/step/interfaces.py).
"""
from __future__ import annotations

ORDERS = ("confidence", "listed")


def _curve(probabilities: list[float], width: int) -> list[float]:
    tau = [1.0]
    for p in probabilities[:width]:
        tau.append(tau[-1] + p)
    return tau + [tau[-1]] * (width + 1 - len(tau))


def chain_emission(alpha: float, depth: int, width: int) -> list[float]:
    return _curve([alpha ** i for i in range(1, depth + 1)], width)


def tree_emission(alpha: float, depth: int, topk: int, width: int, order: str = "confidence") -> list[float]:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    child = [alpha * (1 - alpha) ** r for r in range(topk)]
    level, created = list(child), list(child)  # creation order
    for _ in range(depth - 1):
        frontier = sorted(range(len(level)), key=lambda i: (-level[i], i))[:topk]
        level = [level[i] * c for i in frontier for c in child]
        created += level
    best = sorted(range(len(created)), key=lambda i: (-created[i], i))[:width]
    kept = sorted(best, key=lambda i: -created[i]) if order == "confidence" else sorted(best)
    return _curve([created[i] for i in kept], width)
