"""tree-verify: chain drafting/verification becomes a token tree verified in one target pass.

Preconditions: the step drafts a chain with a model (`draft.chain @d`) and verifies it with
`verify.chain @t`. Postconditions: the step drafts a tree (`draft.tree`, depth = the chain's k
unless `depth` is given), verifies it with `verify.tree`, and commits with `kv = "compact"`
(the accepted path's KV entries are moved into place); the graphs of @t and @d take
`mask<tree>` (tree attention mask and tree positions). Provides the fact `tree-verify`.

Before:
    %d = draft.chain @drafter, %ctx {k = 4} : tokens
    %lg = verify.chain @target, %ctx, %d : logits
    %acc = accept.greedy %d, %lg : accepted
    commit %ctx, %acc
After (tree-verify{budget=32,topk=4}):
    %d = draft.tree @drafter, %ctx {budget = 32, depth = 4, topk = 4} : tree
    %lg = verify.tree @target, %ctx, %d : logits
    %acc = accept.greedy %d, %lg : accepted
    commit %ctx, %acc {kv = "compact"}
and in both models: graph(%ids: ids, %pos: positions, %mask: mask<tree>).
"""
from __future__ import annotations

from dataclasses import replace

from specir.errors import SpecirError
from specir.ir.nodes import Attrs, Pipeline
from specir.ir.opdefs import MAX_DRAFT_TOKENS, MAX_TREE_BUDGET, AUTOREGRESSIVE_HINT, ops_of_role, without_defaults
from specir.ir.types import TREE
from specir.pass_infra import Option, Pass


class TreeVerify(Pass):
    name = "tree-verify"
    options = {
        "depth": Option(int, 0, "tree depth; 0 takes the chain's k", min=0, max=MAX_DRAFT_TOKENS,
                        search=(0, 2, 3, 4, 5, 6, 8, 10, 12, 16)),
        "topk": Option(int, 4, "children per node (at most the drafter's vocabulary)", min=1, max=MAX_DRAFT_TOKENS,
                       search=(1, 2, 3, 4, 6, 8)),
        "budget": Option(int, 32, "drafted nodes per step", min=1, max=MAX_TREE_BUDGET,
                         search=(4, 8, 12, 16, 24, 32, 48, 64, 96, 128)),
        "expand": Option(str, "static", "static or dynamic expansion", ("static", "dynamic")),
        "threshold": Option(float, 0.0, "dynamic expansion: minimum path probability", min=0.0, max=1.0,
                            search=(0.0, 0.01, 0.05, 0.1)),
    }
    provides = frozenset({"tree-verify"})

    def run(self, pipeline: Pipeline) -> Pipeline:
        ops = list(pipeline.step.ops)
        drafts = {op.result: op for op in ops if op.name == "draft.chain"}
        if not drafts:
            kinds = ops_of_role(ops, "draft")
            hint = ("the step already drafts a tree (tree-verify has run); drop the second tree-verify"
                    if "draft.tree" in kinds else AUTOREGRESSIVE_HINT if kinds == "none"
                    else "n-gram drafting stays a chain; use a draft model")
            raise SpecirError(f"tree-verify needs a model-drafted chain (draft.chain @model); this step drafts "
                              f"with: {kinds}", hint=hint)
        for op in drafts.values():
            drafter = pipeline.model(op.symbols[0])
            vocab = drafter.graph.result_type.width if drafter is not None and drafter.graph is not None else None
            if vocab is not None and self.topk > vocab:
                raise self.option_error("topk", f"topk {self.topk} is more than the drafter's vocabulary of {vocab} "
                                        f"tokens", f"use topk={min(vocab, 4)} (children per node)")
        touched_models = set()
        for i, op in enumerate(ops):
            if op.name == "draft.chain":
                depth = self.depth or op.attrs["k"]
                attrs = without_defaults("draft.tree", {"depth": depth, "topk": self.topk, "budget": self.budget,
                                                        "expand": self.expand, "threshold": self.threshold})
                ops[i] = replace(op, name="draft.tree", attrs=Attrs(attrs), type=TREE)
                touched_models.add(op.symbols[0])
            elif op.name == "verify.chain" and len(op.values) == 2 and op.values[1] in drafts:
                ops[i] = replace(op, name="verify.tree")
                touched_models.add(op.symbols[0])
            elif op.name == "commit":
                ops[i] = replace(op, attrs=op.attrs.set(kv="compact"))
        models = tuple(m.with_mask("tree") if "@" + m.name in touched_models else m for m in pipeline.models)
        return replace(pipeline, models=models, step=replace(pipeline.step, ops=tuple(ops)))
