"""ngram-draft: draft by prompt lookup (n-gram matching against the context) instead of a model.

Preconditions: the step drafts a chain with a model (`draft.chain @drafter`). Postconditions: that op
is `draft.ngram {k, max_ngram, min_ngram}` (k = the option, or the chain's k when the option is 0);
models that no step op uses any more are dropped from the pipeline (the declared target always
stays: the final verify uses it). Verification, acceptance and commit are unchanged, so the output
is the target's. Provides the fact `ngram-draft`.

Before:
    model @drafter ... { ... }
    %d = draft.chain @drafter, %ctx {k = 4} : tokens
    %lg = verify.chain @target, %ctx, %d : logits
After (ngram-draft{max_ngram=2}):
    %d = draft.ngram %ctx {k = 4, max_ngram = 2} : tokens
    %lg = verify.chain @target, %ctx, %d : logits
(and @drafter is gone).
"""
from __future__ import annotations

from dataclasses import replace

from specir.errors import SpecirError
from specir.ir.nodes import Attrs, Pipeline
from specir.ir.opdefs import AUTOREGRESSIVE_HINT, ops_of_role, without_defaults
from specir.pass_infra import Option, Pass


class NgramDraft(Pass):
    name = "ngram-draft"
    options = {
        "k": Option(int, 0, "drafted tokens per step; 0 keeps the chain's k", min=0, max=16, search=(0, 2, 3, 4, 6)),
        "min_ngram": Option(int, 1, "shortest context suffix matched", min=1, max=8, search=(1, 2)),
        "max_ngram": Option(int, 3, "longest context suffix matched", min=1, max=8, search=(2, 3, 4)),
    }
    provides = frozenset({"ngram-draft"})

    def run(self, pipeline: Pipeline) -> Pipeline:
        if self.min_ngram > self.max_ngram:
            raise SpecirError(f"min_ngram ({self.min_ngram}) is larger than max_ngram ({self.max_ngram})",
                              hint="e.g. ngram-draft{min_ngram=1,max_ngram=3}")
        ops = list(pipeline.step.ops)
        chains = [i for i, op in enumerate(ops) if op.name == "draft.chain"]
        if not chains:
            kinds = ops_of_role(ops, "draft")
            raise SpecirError(f"ngram-draft replaces a model-drafted chain (draft.chain @model); this step drafts "
                              f"with: {kinds}", hint=AUTOREGRESSIVE_HINT if kinds == "none" else
                              "run ngram-draft before tree-verify, on a chain pipeline")
        for i in chains:
            op = ops[i]
            attrs = without_defaults("draft.ngram", {"k": self.k or op.attrs["k"], "min_ngram": self.min_ngram,
                                                     "max_ngram": self.max_ngram})
            ops[i] = replace(op, name="draft.ngram", operands=op.values, attrs=Attrs(attrs))
        used = {s.lstrip("@") for op in ops for s in op.symbols}
        declared = pipeline.attrs.get("target")
        if isinstance(declared, Attrs) and declared.get("model"):
            used.add(str(declared["model"]))
        models = tuple(m for m in pipeline.models if m.name in used)
        return replace(pipeline, models=models, step=replace(pipeline.step, ops=tuple(ops)))
