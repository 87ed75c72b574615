"""The built-in offline proposer: cost-model-guided mutation of pass options and orderings.

Contract: `Proposer(space, score, seeds, rng).next(history, taken)` returns the next candidate's
steps, or None when nothing new is left. Order: the input pipeline (no passes) first, then the
seeds (the memory's mechanisms for the nearest deployments), then the best candidates the cost
model predicts in a broad sample of the space; after that, neighbours (one move away) of the best
measured candidates, ranked by predicted speedup times the cost model's observed error on the most
similar validated candidates (measured / predicted, over those with the same set of passes, else
the same kind of draft, else all), with some exploration; at a local optimum, a jump to a random fresh candidate. `pool` (optional) is a finite space given as a list of
candidates: the broad sample is then the whole pool, ranked by the cost model, and a jump takes
the best predicted member left.
`score(steps) -> (digest, predicted speedup, draft kind)` or None when the candidate is invalid (or
outside the pool); `taken` holds the digests already evaluated or in flight.
"""
from __future__ import annotations

import random
import statistics

from .space import Space

PRIOR_SAMPLE = 200
PRIOR_TAKE = 4
EXPLORE = 0.15


class Proposer:
    def __init__(self, space: Space, score, seeds=(), rng: random.Random | None = None, pool=None):
        self.space, self.score, self.rng = space, score, rng or random.Random(0)
        self.queue = [()] + [tuple(s) for s in seeds]
        self.pool = [tuple(p) for p in pool] if pool is not None else None
        self._prior_done = False

    def _ranked_sample(self, taken) -> list:
        """Fresh candidates of a broad sample of the space (the whole pool when there is one), best
        predicted first."""
        sample = self.pool if self.pool is not None else [self.space.random(self.rng) for _ in range(PRIOR_SAMPLE)]
        ranked = []
        for steps in {self.space.spell(s): s for s in sample}.values():
            scored = self._fresh(steps, taken)
            if scored:
                ranked.append((scored[1] or 0.0, steps))
        ranked.sort(key=lambda x: -x[0])
        return [s for _, s in ranked]

    def _correction(self, history, kind, steps=()) -> float:
        """The cost model's observed error (measured / predicted) on the most similar validated
        candidates: the same set of passes, else the same draft kind, else all."""
        judged = [r for r in history if r.get("status") == "validated" and r.get("predicted")
                  and r["predicted"].get("speedup")]
        names = {s.name for s in steps}
        for pick in (lambda r: {s.name for s in self.space.parse(r["passes"])} == names,
                     lambda r: r.get("kind") == kind, lambda r: True):
            ratios = [r["measured"]["speedup"] / r["predicted"]["speedup"] for r in judged if _safe(pick, r)]
            if ratios:
                return statistics.median(ratios)
        return 1.0

    def _fresh(self, steps, taken):
        scored = self.score(steps)
        if scored is None:
            return None
        digest = scored[0]
        return None if digest in taken else scored

    def next(self, history: list[dict], taken: set[str]):
        while self.queue:
            steps = self.queue.pop(0)
            if self._fresh(steps, taken):
                return steps
        if not self._prior_done:
            self._prior_done = True
            self.queue = self._ranked_sample(taken)[:PRIOR_TAKE]
            return self.next(history, taken)
        validated = sorted((r for r in history if r.get("status") == "validated" and r.get("measured")),
                           key=lambda r: -r["measured"]["speedup"])
        parents = [self.space.parse(r["passes"]) for r in validated[:3]] or [()]
        ranked, seen = [], set()
        for parent in parents:
            for steps in self.space.neighbours(parent):
                key = self.space.spell(steps)
                if key in seen:
                    continue
                seen.add(key)
                scored = self._fresh(steps, taken)
                if scored:
                    ranked.append((scored[1] * self._correction(history, scored[2], steps) if scored[1] else 0.0,
                                   steps))
        if not ranked:  # a local optimum: jump (in a pool, to its best predicted member left)
            if self.pool is not None:
                fresh = self._ranked_sample(taken)
                return fresh[0] if fresh else None
            for _ in range(PRIOR_SAMPLE):
                steps = self.space.random(self.rng)
                if self._fresh(steps, taken):
                    return steps
            return None
        ranked.sort(key=lambda x: -x[0])
        if self.rng.random() < EXPLORE and len(ranked) > 1:
            return self.rng.choice(ranked[1:min(len(ranked), 8)])[1]
        return ranked[0][1]


def _safe(pick, record) -> bool:
    try:
        return bool(pick(record))
    except Exception:  # noqa: BLE001 - a record whose passes no longer parse is not similar
        return False
