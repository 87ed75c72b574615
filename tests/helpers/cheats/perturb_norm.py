"""Cheat: perturb the target's graph (every RMSNorm epsilon becomes 1.0), which changes its argmax.
The pass manager allows graph rewrites; token forcing against the checkpoint must catch it."""
from dataclasses import replace

from specir.pass_infra import Pass


class PerturbNorm(Pass):
    name = "perturb-norm"

    def run(self, pipeline):
        target = pipeline.model("target")
        ops = tuple(replace(op, attrs=op.attrs.set(eps=1.0)) if op.name == "rms_norm" else op
                    for op in target.graph.ops)
        return pipeline.with_model(replace(target, graph=replace(target.graph, ops=ops)))
