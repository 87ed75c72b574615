"""fusion: which neighbouring model-graph ops the GPU backend fuses into one launch, stated in the IR.

Preconditions: none. Postconditions: each selected model region (all by default, or `models`,
comma-separated) has the attribute `fuse = {add_norm, linear_groups, rope_kv_write, swiglu_linear}`
(booleans):
- add_norm: a residual `add` followed by the `rms_norm` of its sum runs as one launch;
- linear_groups: linears that read the same input with compatible weights (q/k/v, gate/up) run as
  one grouped GEMV/GEMM;
- rope_kv_write: the rope of q and k and the KV-cache write run as one launch before attention;
- swiglu_linear: a `swiglu` whose only consumer is a linear (the MLP's down projection) runs as
  that linear's prologue: the kernel computes silu(gate) * up where it would read its input, so
  the [rows, intermediate] activation is neither written nor read and one launch goes (a forward
  whose linear runs cuBLAS, gemm_route.py, keeps the separate swiglu launch for it).
Fused and unfused launches compute the same values (tests/triton_backend/test_fusion_policy.py
compares them bit for bit under the interpreter). Without this pass the Triton lowering writes
its default (all true) into build/pipeline.spec. CPU backends ignore it.

Before:
    model @target attributes {dtype = "bf16", source = "t"} { ... }
After (fusion{add_norm=false}):
    model @target attributes {dtype = "bf16", fuse = {add_norm = false, linear_groups = true,
    rope_kv_write = true, swiglu_linear = true}, source = "t"} { ... }
"""
from __future__ import annotations

from specir.ir.nodes import Attrs, Pipeline
from specir.pass_infra import Option, Pass, models_option, selected_models

FUSIONS = ("add_norm", "linear_groups", "rope_kv_write", "swiglu_linear")  # backends/triton/program.py: the same


def fusion_attrs(add_norm: bool = True, linear_groups: bool = True, rope_kv_write: bool = True,
                 swiglu_linear: bool = True) -> Attrs:
    """The `fuse` model attribute (the Triton lowering's default is all true)."""
    return Attrs({"add_norm": add_norm, "linear_groups": linear_groups, "rope_kv_write": rope_kv_write,
                  "swiglu_linear": swiglu_linear})


class Fusion(Pass):
    name = "fusion"
    options = {
        "add_norm": Option(bool, True, "fuse a residual add with the following rms_norm"),
        "linear_groups": Option(bool, True, "run linears of one input (q/k/v, gate/up) as one launch"),
        "rope_kv_write": Option(bool, True, "fuse the rope of q, k with the KV-cache write"),
        "swiglu_linear": Option(bool, True, "compute a swiglu in the prologue of the linear that alone reads it"),
        "models": models_option(),
    }

    def run(self, pipeline: Pipeline) -> Pipeline:
        fuse = fusion_attrs(self.add_norm, self.linear_groups, self.rope_kv_write, self.swiglu_linear)
        for model in selected_models(pipeline, self.models, self.name):
            pipeline = pipeline.with_model(model.with_attrs(fuse=fuse))
        return pipeline
