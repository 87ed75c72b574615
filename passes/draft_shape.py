"""draft-shape: set how many tokens a chain draft proposes per step.

Preconditions: the step drafts a chain (`draft.chain @model` or `draft.ngram`). Postconditions:
every chain draft op has `k` = the option (n-gram lengths and everything else unchanged). Run it
before tree-verify to set the tree's depth through the chain's k. Provides no fact.

Before:
    %d = draft.chain @drafter, %ctx {k = 4} : tokens
After (draft-shape{k=2}):
    %d = draft.chain @drafter, %ctx {k = 2} : tokens
"""
from __future__ import annotations

from dataclasses import replace

from specir.errors import SpecirError
from specir.ir.nodes import Pipeline
from specir.ir.opdefs import AUTOREGRESSIVE_HINT, ops_of_role
from specir.pass_infra import Option, Pass

CHAIN_DRAFTS = ("draft.chain", "draft.ngram")


class DraftShape(Pass):
    name = "draft-shape"
    options = {"k": Option(int, 4, "drafted tokens per step", min=1, max=16, search=(1, 2, 3, 4, 5, 6, 8))}

    def run(self, pipeline: Pipeline) -> Pipeline:
        ops = pipeline.step.ops
        if not any(op.name in CHAIN_DRAFTS for op in ops):
            kinds = ops_of_role(ops, "draft")
            raise SpecirError(f"draft-shape sets a chain's k; this step drafts with: {kinds}",
                              hint=AUTOREGRESSIVE_HINT if kinds == "none" else
                              "run draft-shape before tree-verify (a tree's depth comes from the chain's k)")
        ops = tuple(replace(op, attrs=op.attrs.set(k=self.k)) if op.name in CHAIN_DRAFTS else op for op in ops)
        return replace(pipeline, step=replace(pipeline.step, ops=ops))
