"""The fusion policy in the IR (passes/fusion.py, the `fuse` model attribute): each flag removes
its fused launch kind from the Triton program, and the unfused program computes the same logits
(bit for bit under the interpreter, fp32 and bf16) as the fused one."""
from __future__ import annotations

import pytest
import torch

from specir.ir.nodes import Attrs
from tests.triton_backend.pipelines import BASE_FUSIONS
from tests.triton_backend.test_gemm_route import _compiled, _forward

ALL_ON = {**BASE_FUSIONS, "swiglu_linear": True}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_each_fusion_is_a_launch_kind_and_keeps_the_logits(tiny_pair, dtype):
    fused = _compiled(tiny_pair, dtype, cublas_min_rows=0, fuse=Attrs(ALL_ON))
    kinds = {launch.kind for launch in fused.program.launches}
    assert {"add_rms_norm", "rope_kv_write"} <= kinds
    assert any(len(launch.attrs.get("weights", ())) > 1 for launch in fused.program.launches)
    assert "swiglu" not in kinds and any(launch.attrs.get("prologue") for launch in fused.program.launches)
    reference = _forward(fused, 3).run().clone()
    for flag, gone in (("add_norm", "add_rms_norm"), ("rope_kv_write", "rope_kv_write"), ("linear_groups", None),
                       ("swiglu_linear", None)):
        model = _compiled(tiny_pair, dtype, cublas_min_rows=0, fuse=Attrs({**ALL_ON, flag: False}))
        launches = model.program.launches
        if gone:
            assert gone not in {launch.kind for launch in launches}, flag
        elif flag == "swiglu_linear":  # tests/triton_backend/test_swiglu_prologue.py: more cases
            assert not any(launch.attrs.get("prologue") for launch in launches)
        else:
            assert all(len(launch.attrs.get("weights", ())) <= 1 for launch in launches)
        assert len(launches) > len(fused.program.launches), flag
        assert torch.equal(_forward(model, 3).run(), reference), flag
