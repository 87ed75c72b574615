"""batch-fusion: every request's draft verified in one packed forward, with the batching mechanisms.

Preconditions: the step verifies a draft (`verify.chain @t, %ctx, %d` or `verify.tree @t, %ctx,
%d`), on any target (a hybrid's recurrent ops run per request around the packed rows). Postconditions: the verify is `verify.packed` (the
live requests' valid nodes packed into one token list by cumulative offsets, no padding: see
specir/step/ragged.py) and the target's graph takes `mask<tree>` (a mask row per packed token).
Mechanisms, each an option the search toggles:
- `budget = N` (N > 0): one budget of N drafted tokens per step for the whole batch, split by
  draft confidence (`split = "confidence"`) or equally (`split = "equal"`): a `batch.budget` op
  between the draft and the verify;
- `shrink = true` (the default): the budget per live batch size from the cost model
  (specir/batch_schedule.py for `target`, assuming per-token acceptance `alpha`): fewer drafted
  tokens per request as the batch grows, none (a plain AR verify) once the verify is
  compute-bound, so by default speculation turns itself off before it costs more than it gains
  (where the draft can stop: a draft op without `off_at`, e.g. two-level-verify's draft.cascade,
  runs whatever the budget, so the table prices "verify nothing" with its forwards);
  `target = ""` prices for the target being compiled for (`specir compile --target T`), h200
  under `specir opt`; `shrink = false` verifies every request's whole draft at any batch size
  (or the fixed `budget`). The table is printed as the
  `batch.budget` op's `tokens` list, and as the draft op's `off_at` (the live batch size from which
  the drafter only catches up: the step is then autoregressive, no drafting forward runs);
- `narrow = true` (with a budget): the draft drafts no more than the budget keeps per request, as
  the draft op's `narrow` interface says (draft.tree: `topk_at`, fewer children per node as the
  batch grows, chosen so that the nodes each request's share of the budget keeps are as likely
  as in the full tree, and `depth_at`, no more levels than the most nodes one request can keep:
  its share with `split = "equal"`, the whole budget with `"confidence"`, where one confident
  request may keep every node);
- `commit = "in-place"`: a tree's commit moves only the rows out of place (`kv = "in-place"`);
  `"compact"` keeps the full move. A chain's commit stays `kv = "prefix"` (nothing moves).
Provides the fact `batch-fusion`.

Before (after tree-verify):
    %d = draft.tree @drafter, %ctx {budget = 16, depth = 4, topk = 2} : tree
    %lg = verify.tree @target, %ctx, %d : logits
    %acc = accept.greedy %d, %lg : accepted
    commit %ctx, %acc {kv = "compact"}
After (batch-fusion{budget=24,shrink=false}):
    %d = draft.tree @drafter, %ctx {budget = 16, depth = 4, topk = 2} : tree
    %d_batch = batch.budget %ctx, %d {tokens = [24]} : tree
    %lg = verify.packed @target, %ctx, %d_batch : logits
    %acc = accept.greedy %d_batch, %lg : accepted
    commit %ctx, %acc {kv = "in-place"}
"""
from __future__ import annotations

from dataclasses import replace

from specir.batch_schedule import budget_table
from specir.errors import SpecirError
from specir.ir.nodes import Attrs, Op, Pipeline
from specir.live_table import entry
from specir.step.interfaces import StepInfo
from specir.ir.opdefs import OPS, ops_of_role, without_defaults
from specir.pass_infra import Option, Pass
from specir.targets import all_targets, get_target

VERIFIES = ("verify.chain", "verify.tree")


class BatchFusion(Pass):
    name = "batch-fusion"
    options = {
        "budget": Option(int, 0, "drafted tokens per step for the whole batch; 0: every request its whole draft",
                         min=0, max=1 << 16, search=(0, 16, 32, 64, 128, 256)),
        "split": Option(str, "confidence", "how the budget is shared", ("confidence", "equal")),
        "shrink": Option(bool, True, "budget per batch size from the cost model (0 when compute-bound)"),
        "target": Option(str, "", "the target the shrink table is priced for (\"\": the compile target, "
                                  "h200 under specir opt)", search=("",)),
        "alpha": Option(float, 0.7, "per-token acceptance the shrink table assumes", min=0.0, max=0.999,
                        search=(0.5, 0.7, 0.85)),
        "max_batch": Option(int, 64, "largest batch the shrink table covers", min=1, max=4096, search=(64,)),
        "commit": Option(str, "in-place", "a tree's KV commit", ("in-place", "compact")),
        "narrow": Option(bool, False, "the draft drafts no more than the budget keeps per request (draft.tree: "
                                      "fewer children per node as the batch grows)", search=(False, True)),
    }
    provides = frozenset({"batch-fusion"})

    def run(self, pipeline: Pipeline) -> Pipeline:
        ops = list(pipeline.step.ops)
        if any(op.name == "verify.packed" for op in ops):
            raise SpecirError("batch-fusion has already run on this pipeline (the step verifies with verify.packed)",
                              hint="drop the second batch-fusion")
        index = next((i for i in range(len(ops) - 1, -1, -1) if ops[i].name in VERIFIES), None)
        if index is None:
            kinds = ops_of_role(ops, "verify")
            raise SpecirError(f"batch-fusion fuses a verify.chain or verify.tree; this step verifies with: {kinds}",
                              hint="batch-fusion runs after tree-verify or on a chain pipeline")
        verify = ops[index]
        if len(verify.values) < 2:
            raise SpecirError("batch-fusion: the step drafts nothing (plain autoregressive decoding), so there is "
                              "nothing to fuse", hint="add a draft op, e.g. specir init --drafter DIR")
        if self.narrow and not (self.shrink or self.budget):
            raise self.option_error("narrow", "narrow=true narrows the draft to what a budget keeps, and there is "
                                    "no budget", "add shrink=true or budget=N")
        if self.shrink and self._priced_for() not in all_targets():
            raise self.option_error("target", f"unknown target {self._priced_for()!r} for the shrink table",
                                    "targets: " + ", ".join(sorted(all_targets())))
        ctx_name, draft = verify.values[0], verify.values[1]
        fed = draft
        if self.budget or self.shrink:
            fed = _fresh(pipeline, draft + "_batch")
            tokens = [self.budget] if not self.shrink else None
            budget_op = Op("batch.budget", (ctx_name, draft),
                           Attrs(without_defaults("batch.budget", {"tokens": tuple(tokens or [0]),
                                                                   "split": self.split})),
                           result=fed, type=_type_of(ops, draft), loc=verify.loc)
            ops.insert(index, budget_op)
            index += 1
        ops[index] = replace(verify, name="verify.packed", operands=(verify.operands[0], ctx_name, fed))
        for i, op in enumerate(ops):
            if i > index and draft in op.values:
                ops[i] = replace(op, operands=tuple(fed if o == draft else o for o in op.operands))
            if op.name == "commit" and op.attrs.get("kv") == "compact":
                ops[i] = replace(ops[i], attrs=ops[i].attrs.set(kv=self.commit))
        models = tuple(m.with_mask("tree") if "@" + m.name == verify.symbols[0] else m for m in pipeline.models)
        out = replace(pipeline, models=models, step=replace(pipeline.step, ops=tuple(ops)))
        if self.shrink or self.narrow:
            from specir.ir.verifier import infer_types
            typed = infer_types(out)
            info = StepInfo(typed)
            narrowed, table = self._narrowed(typed, info, draft) if self.narrow else ({}, self._table(typed))
            off_at = _first_zero_tail(table) if self.shrink else 0
            ops = []
            for op in _with_draft_attrs(typed, draft, narrowed).step.ops:
                if op.result == fed and self.shrink:
                    op = replace(op, attrs=op.attrs.set(tokens=tuple(table)))
                elif op.result == draft and off_at and "off_at" in OPS[op.name].attrs:
                    op = replace(op, attrs=op.attrs.set(off_at=off_at))
                ops.append(op)
            out = replace(out, step=replace(out.step, ops=tuple(ops)))
        return out


    def _narrowed(self, typed: Pipeline, info: StepInfo, draft: str) -> tuple[dict, list[int]]:
        """(the draft op's narrowed attributes, the table priced with them): narrow from the table,
        reprice the table with the narrowed draft, until they agree. Where that never settles (a
        cheaper draft lifts a zero of the table that the wider draft had, and back), the draft is
        narrowed for the most nodes per request any table visited kept at each size, and the table
        priced for that: the printed table always prices the printed draft, and the draft is never
        narrower than a table it was derived from wanted."""
        narrowed, seen, wants = {}, [], []  # the narrowings derived so far, the nodes per request they came from
        while True:
            priced = _with_draft_attrs(typed, draft, narrowed)
            table = self._table(priced)
            op = next(o for o in priced.step.ops if o.result == draft)
            narrowing = info.interfaces(op).narrow
            if narrowing is None:
                return {}, table
            per_request = [max(1, -(-entry(table, b) // b)) for b in range(1, self.max_batch + 1)]
            # the most one request keeps: its share when split equally, the whole budget by confidence
            deepest = per_request if self.split == "equal" else [entry(table, b) for b in range(1, self.max_batch + 1)]
            wants.append((per_request, deepest))
            wanted = narrowing(op, info, self.alpha, per_request, deepest)
            if wanted == narrowed:
                return narrowed, table
            if wanted in seen or len(seen) >= 8:
                most = narrowing(op, info, self.alpha, [max(n) for n in zip(*(w[0] for w in wants))],
                                 [max(n) for n in zip(*(w[1] for w in wants))])
                return most, self._table(_with_draft_attrs(typed, draft, most))
            seen.append(wanted)
            narrowed = wanted

    def _priced_for(self) -> str:
        """The target the shrink table prices: the option, else the compile target, else h200."""
        return self.target or self.compile_target or "h200"

    def _table(self, pipeline: Pipeline) -> list[int]:
        """Drafted tokens per live batch size: the shrink table (capped by budget), else the budget."""
        if not self.shrink:
            return [self.budget] * self.max_batch
        table = budget_table(pipeline, get_target(self._priced_for()), self.max_batch, self.alpha)
        return [min(t, self.budget) for t in table] if self.budget else table


def _with_draft_attrs(pipeline: Pipeline, draft: str, attrs: dict) -> Pipeline:
    """`pipeline` with `attrs` set on the op that defines `draft`."""
    if not attrs:
        return pipeline
    ops = tuple(replace(op, attrs=op.attrs.set(**attrs)) if op.result == draft else op for op in pipeline.step.ops)
    return replace(pipeline, step=replace(pipeline.step, ops=ops))


def _first_zero_tail(table: list[int]) -> int:
    """The smallest live batch size from which the table drafts nothing (0: none)."""
    if table[-1] != 0:
        return 0
    b = len(table)
    while b > 1 and table[b - 2] == 0:
        b -= 1
    return b


def _type_of(ops, value: str):
    return next((op.type for op in ops if op.result == value), None)


def _fresh(pipeline: Pipeline, name: str) -> str:
    used = {v for op in pipeline.step.ops for v in ((op.result,) if op.result else ()) + op.values}
    candidate, n = name, 1
    while candidate in used:
        candidate, n = f"{name}{n}", n + 1
    return candidate
