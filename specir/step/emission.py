"""Expected emission of a draft cut to its n most confident nodes, at per-token acceptance alpha.

Contract: a curve `tau` with `tau[n]` (n = 0 .. width) the expected tokens one step emits per request
when the verify keeps the draft's n best nodes (the bonus token included, so `tau[0] == 1`), under
the model that the drafter's r-th choice at a node (r = 0, 1, ...) is the target's token with
probability alpha * (1 - alpha)^r, independently along a path (alpha: the top choice's acceptance).
A node is accepted when its whole path is, so tau[n] = 1 + the sum of the n largest path
probabilities among the nodes the draft holds; the kept nodes are ancestor-closed (a child's path
probability never exceeds its parent's), as batch.budget's confidence split keeps them.
- `chain_emission(alpha, depth, width)`: a single path of `depth` tokens (n past the depth adds
  nothing): 1 + alpha + ... + alpha^min(n, depth). The default for draft ops that declare no shape.
- `tree_emission(alpha, depth, topk, width)`: the best-first tree draft.tree builds (each level
  expands the `topk` most probable nodes of the level before by their `topk` children, `depth`
  levels), its `width` most probable nodes.
Draft ops pick their curve through `StepInterfaces.emission` (specir/step/interfaces.py).
"""
from __future__ import annotations


def _curve(probabilities: list[float], width: int) -> list[float]:
    tau = [1.0]
    for p in sorted(probabilities, reverse=True)[:width]:
        tau.append(tau[-1] + p)
    return tau + [tau[-1]] * (width + 1 - len(tau))


def chain_emission(alpha: float, depth: int, width: int) -> list[float]:
    return _curve([alpha ** i for i in range(1, depth + 1)], width)


def tree_emission(alpha: float, depth: int, topk: int, width: int) -> list[float]:
    child = [alpha * (1 - alpha) ** r for r in range(topk)]
    level, nodes = list(child), list(child)
    for _ in range(depth - 1):
        level = [p * c for p in sorted(level, reverse=True)[:topk] for c in child]
        nodes += level
    return _curve(nodes, width)
