"""Which decode steps run wholly on the device: matching the IR's step ops to a schedule.

Contract: `match_schedule(pipeline)` returns a `Schedule` when the step is one of
  AR      verify.chain @t %ctx;                 accept.*; commit
  chain   draft.chain @d %ctx {k};              verify.chain @t %ctx %draft; accept.*; commit
  ngram   draft.ngram %ctx {k, max_ngram, min_ngram}; verify.chain @t %ctx %draft; accept.*; commit
  tree    draft.tree @d %ctx {expand = "static"}; verify.tree @t %ctx %tree; accept.*; commit
with the values wired as written (verify reads the draft, accept reads verify's logits and at
most the draft, commit reads the context and accept's result) and the drafter a different model
from the target; otherwise a string saying why not (the host path then interprets the step op
by op). Every parameter of the schedule comes from the ops' attributes; `compact` is commit's
`kv = "compact"`. Acceptance on the device is greedy, so temperature > 0 also takes the host
path (decided per call by the engine).
"""
from __future__ import annotations

from dataclasses import dataclass

from specir.ir.nodes import Pipeline


@dataclass(frozen=True)
class Schedule:
    kind: str  # ar | chain | ngram | tree
    target: str
    drafter: str | None = None
    k: int = 0
    max_ngram: int = 3
    min_ngram: int = 1
    depth: int = 0
    topk: int = 0
    budget: int = 0
    compact: bool = False

    @property
    def verify_width(self) -> int:
        """Nodes per request in one target forward (pending token included)."""
        if self.kind == "tree":
            return min(self.budget, self.candidates) + 1
        return self.k + 1

    @property
    def candidates(self) -> int:
        """Tree candidates the static expansion creates: topk, then topk^2 per further level."""
        return self.topk + (self.depth - 1) * self.topk * self.topk

    @property
    def feed_width(self) -> int:
        """Tokens the drafter catches up per step (the previous step's emitted tokens, at most)."""
        return self.depth + 1 if self.kind == "tree" else self.k + 1

    @property
    def drafter_rows(self) -> int:
        """Scratch rows the drafter writes past its committed length in one step."""
        if self.kind == "tree":
            return self.feed_width + (self.depth - 1) * self.topk
        return self.feed_width + self.k


def match_schedule(pipeline: Pipeline) -> Schedule | str:
    step = pipeline.step
    if step is None:
        return "the pipeline has no step"
    ops = list(step.ops)
    ctx = step.params[0][0] if step.params else None
    names = [op.name for op in ops]
    draft = None
    if len(ops) == 4 and names[0].startswith("draft."):
        draft, ops = ops[0], ops[1:]
    if len(ops) != 3:
        return f"step ops {names} are not draft?; verify; accept; commit"
    verify, accept, commit = ops
    if not (verify.name.startswith("verify.") and accept.name in ("accept.greedy", "accept.sample")
            and commit.name == "commit"):
        return f"step ops {names} are not draft?; verify; accept; commit"
    target = verify.symbols[0][1:]
    if verify.values[0] != ctx or commit.values != (ctx, accept.result) or accept.values[-1] != verify.result:
        return "the step's values are not wired draft -> verify -> accept -> commit"
    compact = commit.attrs.get("kv", "prefix") == "compact"
    if draft is None:
        if verify.name != "verify.chain" or len(verify.values) != 1 or len(accept.values) != 1:
            return "a step without a draft must be verify.chain @target, %ctx"
        return Schedule("ar", target, compact=compact)
    if draft.values[0] != ctx or verify.values[1:] != (draft.result,) or accept.values[:-1] not in ((), (draft.result,)):
        return "the draft does not feed verify (and acceptance) directly"
    a = draft.attrs
    drafter = draft.symbols[0][1:] if draft.symbols else None
    if drafter is not None and drafter == target:
        return "the drafter is the target itself (one cache would serve both)"
    if draft.name == "draft.chain" and verify.name == "verify.chain":
        return Schedule("chain", target, drafter, k=int(a["k"]), compact=compact)
    if draft.name == "draft.ngram" and verify.name == "verify.chain":
        return Schedule("ngram", target, None, k=int(a["k"]), max_ngram=int(a.get("max_ngram", 3)),
                        min_ngram=int(a.get("min_ngram", 1)), compact=compact)
    if draft.name == "draft.tree" and verify.name == "verify.tree":
        if a.get("expand", "static") != "static":
            return "dynamic tree expansion (data-dependent shapes) runs on the host path"
        return Schedule("tree", target, drafter, depth=int(a["depth"]), topk=int(a["topk"]),
                        budget=int(a["budget"]), compact=compact)
    return f"no device schedule for {draft.name} + {verify.name}"
