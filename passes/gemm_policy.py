"""gemm-policy: which library runs a model's plain bf16 linear groups on the GPU, stated in the IR.

Preconditions: none. Postconditions: each selected model region (all by default, or `models`,
comma-separated) has the attribute `cublas_min_rows = N`: forwards of N rows or more (rows =
batch x new tokens) run their plain bf16 linear groups through cuBLAS, smaller ones the Triton
kernel; 0 keeps Triton everywhere (bit-identity with a packed twin at every width). Without this
pass the Triton lowering writes its default (8; 0 for regions with packed weights) into
build/pipeline.spec. CPU backends ignore it.

Before:
    model @target attributes {dtype = "bf16", source = "t"} { ... }
After (gemm-policy{cublas_min_rows=0}):
    model @target attributes {cublas_min_rows = 0, dtype = "bf16", source = "t"} { ... }
"""
from __future__ import annotations

from specir.ir.nodes import Pipeline
from specir.pass_infra import Option, Pass, models_option, selected_models


class GemmPolicy(Pass):
    name = "gemm-policy"
    options = {
        "cublas_min_rows": Option(int, 8, "rows from which plain bf16 linears run cuBLAS; 0 = never", min=0,
                                  max=1 << 20, search=(0, 8, 32)),
        "models": models_option(),
    }

    def run(self, pipeline: Pipeline) -> Pipeline:
        for model in selected_models(pipeline, self.models, self.name):
            pipeline = pipeline.with_model(model.with_attrs(cublas_min_rows=self.cublas_min_rows))
        return pipeline
