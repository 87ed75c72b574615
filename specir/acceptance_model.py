"""The acceptance side of the cost model: one profile of the drafter/target pair on a workload,
and the mean accepted length (tau) it predicts for a draft op, without running the pipeline.

Profile (Sequoia's measurement): the target's greedy continuation of each prompt, and the rank of
each continuation token among the drafter's logits on the same prefix (teacher forcing along the
target's path). Each draft op declares its own rule (`StepInterfaces.accepted`: the drafted
tokens the target accepts at a position of the path; a draft op without one is a SpecirError
naming it) and this module simulates the steps with it. Along an accepted prefix the drafter's own
path is the target's, so:
- a greedy chain of k accepts the run of rank-0 positions from the step's start (capped at k): tau
  for a chain is simulated exactly from the ranks (`run_length`);
- a tree accepts the longest prefix of the rank path that the tree holds (`tree_accepted`); the
  tree's shape is built from the acceptance-by-sibling-rank probabilities the way the drafter
  builds it (`rank_tree`, EAGLE-2 best-first: expand the `topk` best nodes of each level, keep the
  `budget` best overall);
- n-gram lookup is simulated exactly on the continuation (draft.ngram's own lookup, `matched`);
- a two-level step (draft.cascade) also needs the mid level's ranks on the same path
  (`region_ranks`, for any model region, derived ones included): see `Profile.tau`.
`acceptance_by_depth` (P(accept at depth d | accepted before it)) and `acceptance_by_rank`
(P(the target's token is the drafter's r-th choice)) summarise the pair.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .errors import SpecirError
from .step.interfaces import interfaces_of

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
    mids: dict = field(default_factory=dict)  # model-region key -> its ranks per sequence (two-level steps)
    device: str = "cpu"  # where mid regions run to be ranked (not saved)

    def as_dict(self) -> dict:
        return {"drafter": self.drafter, "sequences": [s.__dict__ for s in self.sequences],
                "acceptance_by_depth": self.acceptance_by_depth(), "acceptance_by_rank": self.acceptance_by_rank(),
                "mids": self.mids}

    @classmethod
    def from_dict(cls, data: dict) -> "Profile":
        return cls([Sequence(**s) for s in data["sequences"]], data.get("drafter"), dict(data.get("mids") or {}))

    def within(self, kept) -> "Profile":
        """The profile of a drafter that proposes some ids only (draft-vocab's head): `kept` is an int
        (ids below it) or a set of ids. A continuation token outside gets RANK_CAP (never drafted);
        the others keep their rank among the whole vocabulary, an upper bound on their rank among
        the kept ids. Itself when nothing is cut (or `kept` is None)."""
        if kept is None:
            return self
        inside = kept.__contains__ if isinstance(kept, (set, frozenset)) else (lambda t: t < kept)
        if all(inside(t) for s in self.sequences for t in s.continuation):
            return self
        cut = [Sequence(s.prompt, s.continuation, [r if inside(t) else RANK_CAP for r, t in zip(s.ranks, s.continuation)])
               for s in self.sequences]
        return Profile(cut, self.drafter, self.mids, self.device)

    def mid_ranks(self, model) -> list[list[int]]:
        """The ranks of a mid level's model region on the profiled path, measured once per region."""
        key = region_key(model)
        if key not in self.mids:
            self.mids[key] = region_ranks(model, self, self.device)
        return self.mids[key]

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
    def tau(self, draft_op, cascade_op=None, mid_ranks: list[list[int]] | None = None) -> float:
        """Tokens emitted per step for a draft op (name, attrs), or 1.0 for none. With `cascade_op` (a
        two-level step's draft.cascade) and `mid_ranks` (the mid level's ranks of each continuation
        token, as `region_ranks` gives): along the target's path the mid level agrees with the
        drafter exactly where the drafter's token is the target's, so the target accepts
        min(the mid's run of rank-0 tokens, min(the drafter's accepted run, D) + extend)."""
        if draft_op is None:
            return 1.0
        inner = self._accepted(draft_op)
        if cascade_op is None:
            return self._simulate(inner)
        if mid_ranks is None or len(mid_ranks) != len(self.sequences):
            raise ValueError("a two-level prediction needs the mid level's ranks for every profiled sequence")
        extend, depth = int(cascade_op.attrs.get("extend", 2)), draft_depth(draft_op)
        ranks = {id(s): r for s, r in zip(self.sequences, mid_ranks)}
        return self._simulate(lambda s, i: min(run_length(ranks[id(s)], i, depth + extend),
                                               min(inner(s, i), depth) + extend))

    def _accepted(self, draft_op):
        """(sequence, position) -> drafted tokens the target accepts there: the draft op's own rule."""
        rule = interfaces_of(draft_op).accepted
        if rule is None:
            raise SpecirError(f"draft op {draft_op.name!r} declares no acceptance rule, so the cost model cannot "
                              f"predict its mean accepted length", location=draft_op.loc,
                              hint="its StepInterfaces needs accepted=(op, profile) -> ((sequence, i) -> "
                                   "accepted tokens) (see specir/step/interfaces.py)")
        return rule(draft_op, self)

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


def draft_depth(draft_op) -> int:
    """The longest drafted path of a draft op (its `depth` interface, from its attributes alone)."""
    return int(interfaces_of(draft_op).depth(draft_op, None))


def run_length(ranks: list[int], i: int, k: int) -> int:
    """The run of rank-0 positions from i (at most k): what a greedy chain of k accepts there."""
    a = 0
    while a < k and i + a < len(ranks) and ranks[i + a] == 0:
        a += 1
    return a


def matched(proposal: list[int], s: Sequence, i: int) -> int:
    """How many leading tokens of a fixed `proposal` at position i are the target's continuation."""
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


def tree_accepted(ranks: list[int], i: int, tree: set[tuple]) -> int:
    """The longest prefix of the rank path from i that `tree` (a rank_tree) holds."""
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
            ranks = ranks_of(drafter.logits(list(prompt) + list(cont[:-1]))[len(prompt) - 1:], cont)
        sequences.append(Sequence(list(prompt), list(cont), ranks))
    return Profile(sequences, str(drafter_model.attrs.get("source")) if drafter_model is not None else None)


def ranks_of(logits, continuation: list[int]) -> list[int]:
    """The rank of each continuation token in its row of `logits` [len(continuation), V] (capped)."""
    out = []
    for j, tok in enumerate(continuation):
        row = logits[j]
        out.append(min(int((row > row[tok]).sum()), RANK_CAP) if tok < row.shape[-1] else RANK_CAP)
    return out


def region_ranks(model, prof: Profile, device: str = "cpu") -> list[list[int]]:
    """The ranks an expanded model region (e.g. a two-level step's @mid, derived from the target)
    gives each profiled continuation token, teacher-forced along the target's path; the region
    runs as the IR says (the reference kernels), so a derived region needs no checkpoint of its own."""
    import torch

    from .runtime.model_runner import ModelRunner
    from .runtime.weights import load_weights
    weights = load_weights(model, device)
    out = []
    with torch.no_grad():
        for s in prof.sequences:
            if not s.continuation:
                out.append([])
                continue
            ids = list(s.prompt) + list(s.continuation[:-1])
            runner = ModelRunner(model, weights, slots=1, max_seq=len(ids) + 1, state_nodes=1, device=device)
            x = torch.tensor([ids], device=device)
            logits = runner.forward([0], x, torch.arange(len(ids), device=device)[None])[0].float()
            out.append(ranks_of(logits[len(s.prompt) - 1:], s.continuation))
    return out


def region_key(model) -> str:
    """A stable name for a model region's computation (its attributes, weights and ops)."""
    import hashlib
    return hashlib.sha256(repr((model.attrs, model.weights, model.graph.ops)).encode()).hexdigest()[:16]
