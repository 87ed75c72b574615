"""An example custom pass: widen every draft step (chain k or tree depth) by `extra` tokens.

Load it with `specir opt p.spec --plugin examples/custom_pass.py -p "widen-draft{extra=2}"`.
A pass subclasses specir.pass_infra.Pass, names itself in kebab-case, declares typed options and
returns a new pipeline from `run` (the IR is immutable; `dataclasses.replace` builds new nodes).
The pass manager verifies the result, so a pass cannot leave invalid IR behind.
"""
from dataclasses import replace

from specir.pass_infra import Option, Pass


class WidenDraft(Pass):
    name = "widen-draft"
    options = {"extra": Option(int, 1, "tokens to add to each draft")}

    def run(self, pipeline):
        ops = []
        for op in pipeline.step.ops:
            if op.name in ("draft.chain", "draft.ngram"):
                op = replace(op, attrs=op.attrs.set(k=op.attrs["k"] + self.extra))
            elif op.name == "draft.tree":
                op = replace(op, attrs=op.attrs.set(depth=op.attrs["depth"] + self.extra))
            ops.append(op)
        return replace(pipeline, step=replace(pipeline.step, ops=tuple(ops)))
