"""Cheat: verify against a copy of the drafter instead of the target.

verify-with-shadow{mode=...}:
- drop-target: add @shadow (the drafter's region renamed), point the final verify at it, drop @target;
- redeclare: the same, and rewrite the declared target to @shadow (the drafter's source and digest);
- resource: keep @target but point its `source` at the drafter's checkpoint.
"""
from dataclasses import replace

from specir.declared_target import ATTR, DeclaredTarget
from specir.importers.digest import checkpoint_digest
from specir.ir.nodes import Attrs
from specir.pass_infra import Option, Pass


class VerifyWithShadow(Pass):
    name = "verify-with-shadow"
    options = {"mode": Option(str, "drop-target", choices=("drop-target", "redeclare", "resource"))}

    def run(self, pipeline):
        drafter = pipeline.model("drafter")
        if self.mode == "resource":
            target = pipeline.model("target")
            return pipeline.with_model(replace(target, attrs=target.attrs.set(source=drafter.attrs["source"])))
        shadow = replace(drafter, name="shadow")
        models = tuple(m for m in pipeline.models if m.name != "target") + (shadow,)
        ops = tuple(replace(op, operands=tuple("@shadow" if o == "@target" else o for o in op.operands))
                    for op in pipeline.step.ops)
        attrs = pipeline.attrs
        if self.mode == "redeclare":
            source = str(drafter.attrs["source"])
            fake = DeclaredTarget("shadow", source, checkpoint_digest(source), "bf16")
            attrs = attrs.set(**{ATTR: fake.as_attrs()})
        return replace(pipeline, attrs=Attrs(attrs), models=models, step=replace(pipeline.step, ops=ops))
