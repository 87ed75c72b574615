"""The acceptance side of the cost model: one profile of the drafter/target pair on a workload,
and the mean accepted length (tau) it predicts for a draft op, without running the pipeline.

Profile (Sequoia's measurement): the target's greedy continuation of each prompt, and the rank of
each continuation token among the drafter's logits on the same prefix (teacher forcing along the
target's path). Along an accepted prefix the drafter's own path is the target's, so:
- a greedy chain of k accepts the run of rank-0 positions from the step's start (capped at k): tau
  for a chain is simulated exactly from the ranks;
- a tree accepts the longest prefix of the rank path that the tree holds; the tree's shape is
  built from the acceptance-by-sibling-rank probabilities the way the drafter builds it (EAGLE-2
  best-first: expand the `topk` best nodes of each level, keep the `budget` best overall);
- n-gram lookup is simulated exactly on the continuation (runtime.drafting's rule).
`acceptance_by_depth` (P(accept at depth d | accepted before it)) and `acceptance_by_rank`
(P(the target's token is the drafter's r-th choice)) summarise the pair.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

RANK_CAP = 16  # ranks >= this are stored as RANK_CAP


@dataclass
class Sequence:
    prompt: list[int]
    continuation: list[int]
    ranks: list[int] = field(default_factory=list)  # drafter rank of each continuation token; empty: no drafter


@dataclass
class Profile:
    sequences: list[Sequence]
    drafter: str | None

    def as_dict(self) -> dict:
        return {"drafter": self.drafter, "sequences": [s.__dict__ for s in self.sequences],
                "acceptance_by_depth": self.acceptance_by_depth(), "acceptance_by_rank": self.acceptance_by_rank()}

    @classmethod
    def from_dict(cls, data: dict) -> "Profile":
        return cls([Sequence(**s) for s in data["sequences"]], data.get("drafter"))

    def acceptance_by_rank(self, ranks: int = 8) -> list[float]:
        all_ranks = [r for s in self.sequences for r in s.ranks]
        n = max(len(all_ranks), 1)
        return [sum(1 for r in all_ranks if r == i) / n for i in range(ranks)]

    def acceptance_by_depth(self, depth: int = 8) -> list[float]:
        hits, tries = [0] * depth, [0] * depth
        for s in self.sequences:
            for i in range(len(s.ranks)):
                for d in range(depth):
                    if i + d >= len(s.ranks):
                        break
                    tries[d] += 1
                    if s.ranks[i + d] != 0:
                        break
                    hits[d] += 1
        return [h / t if t else 0.0 for h, t in zip(hits, tries)]

    # ------------------------------------------------------------------ predictions
    def tau(self, draft_op) -> float:
        """Tokens emitted per step for a draft op (name, attrs), or 1.0 for none."""
        if draft_op is None:
            return 1.0
        a = draft_op.attrs
        if draft_op.name == "draft.chain":
            return self._simulate(lambda s, i: _run_length(s.ranks, i, int(a["k"])))
        if draft_op.name == "draft.ngram":
            k, hi, lo = int(a["k"]), int(a.get("max_ngram", 3)), int(a.get("min_ngram", 1))
            return self._simulate(lambda s, i: _ngram_accepted(s, i, k, hi, lo))
        if draft_op.name == "draft.tree":
            tree = rank_tree(self.acceptance_by_rank(RANK_CAP), int(a["depth"]), int(a["topk"]), int(a["budget"]),
                             float(a.get("threshold", 0.0)) if a.get("expand", "static") == "dynamic" else 0.0)
            return self._simulate(lambda s, i: _tree_accepted(s.ranks, i, tree))
        return 1.0

    def _simulate(self, accepted) -> float:
        emitted = steps = 0
        for s in self.sequences:
            i, n = 0, len(s.continuation)
            while i < n:
                a = min(accepted(s, i), n - i - 1)
                emitted += a + 1
                steps += 1
                i += a + 1
        return emitted / steps if steps else 1.0


def _run_length(ranks: list[int], i: int, k: int) -> int:
    a = 0
    while a < k and i + a < len(ranks) and ranks[i + a] == 0:
        a += 1
    return a


def _ngram_accepted(s: Sequence, i: int, k: int, max_ngram: int, min_ngram: int) -> int:
    seq = s.prompt + s.continuation[:i]
    proposal: list[int] = []
    for n in range(min(max_ngram, len(seq) - 1), min_ngram - 1, -1):
        suffix = seq[-n:]
        for start in range(len(seq) - n - 1, -1, -1):
            if seq[start:start + n] == suffix:
                proposal = seq[start + n:start + n + k]
                break
        if proposal:
            break
    a = 0
    while a < len(proposal) and i + a < len(s.continuation) and proposal[a] == s.continuation[i + a]:
        a += 1
    return a


def rank_tree(p_rank: list[float], depth: int, topk: int, budget: int, threshold: float = 0.0) -> set[tuple]:
    """The nodes (paths of sibling ranks) of a best-first tree built on estimated path probabilities."""
    logp = [math.log(max(p, 1e-9)) for p in p_rank]
    kept: dict[tuple, float] = {}
    level = [((r,), logp[r]) for r in range(min(topk, len(logp)))]
    for d in range(depth):
        level = [(n, s) for n, s in level if not threshold or math.exp(s) >= threshold]
        kept.update(level)
        if d + 1 == depth:
            break
        frontier = sorted(level, key=lambda x: -x[1])[:topk]
        level = [(n + (r,), s + logp[r]) for n, s in frontier for r in range(min(topk, len(logp)))]
    best = sorted(kept.items(), key=lambda x: -x[1])[:budget]
    return {n for n, _ in best}


def _tree_accepted(ranks: list[int], i: int, tree: set[tuple]) -> int:
    a, path = 0, ()
    while i + a < len(ranks):
        path = path + (ranks[i + a],)
        if path not in tree:
            break
        a += 1
    return a


def profile(drafter_model, prompts: list[list[int]], continuations: list[list[int]], device: str = "cpu") -> Profile:
    """Profile the pair from the target's greedy `continuations` of `prompts` (plain decoding of the
    target; the caller runs it, e.g. the AR baseline engine): the drafter (its checkpoint, loaded fresh
    in its dtype) ranks every continuation token on the same prefix, one forward per sequence."""
    from .runtime.token_forcing import Reference
    drafter = Reference.of_model(drafter_model, device) if drafter_model is not None else None
    sequences = []
    for prompt, cont in zip(prompts, continuations):
        ranks = []
        if drafter is not None and cont:
            logits = drafter.logits(list(prompt) + list(cont[:-1]))[len(prompt) - 1:]
            for j, tok in enumerate(cont):
                row = logits[j]
                ranks.append(min(int((row > row[tok]).sum()), RANK_CAP) if tok < row.shape[-1] else RANK_CAP)
        sequences.append(Sequence(list(prompt), list(cont), ranks))
    return Profile(sequences, str(drafter_model.attrs.get("source")) if drafter_model is not None else None)
