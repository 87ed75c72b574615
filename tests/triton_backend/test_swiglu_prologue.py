"""The swiglu_linear fusion (passes/fusion.py; program.py, forward.py): a swiglu read only by the
down projection runs in that linear's prologue, one launch fewer per layer; its option prints in
the IR, off gives the separate swiglu launch; fused and unfused forwards give the same logits bits
with bf16 and BF12 weights, at one row (GEMV) and several (GEMM), and where the rows route the
linear to cuBLAS the swiglu runs on its own (under the interpreter without a GPU)."""
from __future__ import annotations

import pytest
import torch

from specir.ir.nodes import Attrs
from tests.triton_backend.pipelines import BASE_FUSIONS, fusion_pass, pipeline
from tests.triton_backend.test_gemm_route import _forward

ALL_ON = {**BASE_FUSIONS, "swiglu_linear": True}
UNFUSED = BASE_FUSIONS
# the tiny target's decode program before this fusion (and with fusion{swiglu_linear=false})
SEPARATE = ["embed", "rms_norm", "linear", "rope_kv_write", "attention", "linear", "add_rms_norm", "linear",
            "swiglu", "linear", "add_rms_norm", "linear"]


def _compiled(model, **attrs):
    from specir.backends.triton.compiled_model import CompiledModel
    from specir.runtime.weights import load_weights
    from tests.triton_backend.conftest import DEVICE
    model = model.with_attrs(**attrs)
    return CompiledModel(model, load_weights(model, DEVICE), DEVICE)


@pytest.fixture(scope="module")
def mlp_pair(tiny_pair, tmp_path_factory):
    """The tiny pair with a target whose MLP is 320 wide: the down projection's K spans two full
    128-groups (the GEMV's prefetching loop) and a ragged tail (its masked iteration)."""
    from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
    from tests.triton_backend.conftest import VOCAB
    folder = make_checkpoint("llama", tmp_path_factory.mktemp("swiglu") / "target", seed=13, num_hidden_layers=1,
                             vocab_size=VOCAB, intermediate_size=320, initializer_range=0.3)
    write_tokenizer(folder, VOCAB)
    return folder, tiny_pair[1]


@pytest.fixture(scope="module")
def packed_pipeline(mlp_pair):
    """The chain pipeline with every target matrix packed to BF12 (thresholds lowered: the tiny
    matrices are below pack-weights' default size and their one 128-group carries its metadata)."""
    from specir.pass_infra import PassManager, build_passes
    p = pipeline("chain", *mlp_pair, dtype="bf16")
    return PassManager(build_passes("pack-weights{min_weights=1,max_bits=40,models=target}")).run(p)


def test_the_option_prints_and_off_keeps_the_separate_launch(tiny_pair):
    from specir.backends.triton.lowering import with_backend_policy
    from specir.backends.triton.program import plan_program
    from specir.ir.printer import print_pipeline
    from specir.pass_infra import PassManager, build_passes
    target, drafter = tiny_pair
    p = pipeline("chain", target, drafter, dtype="bf16")
    default = with_backend_policy(p)  # what the Triton lowering writes into build/pipeline.spec: on
    assert "rope_kv_write = true, swiglu_linear = true}" in print_pipeline(default)
    base = p.model("target").with_attrs(fuse=Attrs(BASE_FUSIONS))
    on = PassManager(build_passes(fusion_pass(swiglu_linear=True))).run(p)
    assert "swiglu_linear = true" in print_pipeline(on)
    off = PassManager(build_passes("fusion{swiglu_linear=false,models=target}")).run(default)
    assert "swiglu_linear = false" in print_pipeline(off)
    fused, separate = plan_program(on.model("target")), plan_program(base)
    assert [launch.kind for launch in separate.launches] == SEPARATE
    assert len(fused.launches) == len(separate.launches) - 1  # one layer: one launch fewer
    down = [launch for launch in fused.launches if launch.attrs.get("prologue")]
    assert [(d.kind, d.ins, d.ops, d.attrs["prologue"], d.attrs["prologue_value"]) for d in down] == [
        ("linear", ("%l0.gate", "%l0.up"), ("%l0.act", "%l0.down"), "swiglu", "%l0.act")]
    # otherwise the same launches in the same order
    plain = lambda launches: [(x.kind, x.outs) for x in launches if x.kind != "swiglu"]  # noqa: E731
    assert plain(fused.launches) == plain(separate.launches)


def test_a_swiglu_with_another_reader_stays_separate(tiny_pair):
    from dataclasses import replace
    from specir.backends.triton.program import plan_program
    from specir.ir.nodes import Op
    target, drafter = tiny_pair
    model = pipeline("chain", target, drafter, dtype="bf16").model("target").with_attrs(fuse=Attrs(ALL_ON))
    ops = list(model.graph.ops)
    act = next(op for op in ops if op.name == "swiglu")
    ops.append(Op("add", (act.result, act.result), result="%extra", type=act.type))
    program = plan_program(replace(model, graph=replace(model.graph, ops=tuple(ops))))
    assert "swiglu" in [launch.kind for launch in program.launches]
    assert not any(launch.attrs.get("prologue") for launch in program.launches)


@pytest.mark.parametrize("T", [1, 3])
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_fused_and_unfused_logits_are_the_same_bits(mlp_pair, dtype, T):
    model = pipeline("chain", *mlp_pair, dtype=dtype).model("target")
    fused = _forward(_compiled(model, cublas_min_rows=0, fuse=Attrs(ALL_ON)), T)
    assert [c["kernel"] for c in fused.configs if c.get("prologue") == "swiglu"] == ["linear.linear_bf16"]
    assert "activation.silu_mul" not in {c["kernel"] for c in fused.configs}
    separate = _forward(_compiled(model, cublas_min_rows=0, fuse=Attrs(UNFUSED)), T)
    assert torch.equal(fused.run(), separate.run())


def test_a_cublas_routed_down_projection_runs_the_swiglu_on_its_own(mlp_pair):
    model = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    fused = _forward(_compiled(model, cublas_min_rows=8, fuse=Attrs(ALL_ON)), 9)  # 9 rows: cuBLAS
    kernels = [c["kernel"] for c in fused.configs]
    assert kernels.count("activation.silu_mul") == 1 and not any(c.get("prologue") for c in fused.configs)
    separate = _forward(_compiled(model, cublas_min_rows=8, fuse=Attrs(UNFUSED)), 9)
    assert [c["kernel"] for c in separate.configs] == kernels
    assert torch.equal(fused.run(), separate.run())
    narrow = _forward(_compiled(model, cublas_min_rows=8, fuse=Attrs(ALL_ON)), 1)  # the decode step: fused
    assert "activation.silu_mul" not in {c["kernel"] for c in narrow.configs}


@pytest.mark.parametrize("T", [1, 3])
def test_packed_fused_and_unfused_logits_are_the_same_bits(mlp_pair, packed_pipeline, T):
    model = packed_pipeline.model("target")
    assert [op.name for op in model.graph.ops].count("packed_linear") == 8
    fused = _forward(_compiled(model, fuse=Attrs(ALL_ON)), T)
    assert [c["kernel"] for c in fused.configs if c.get("prologue") == "swiglu"] == ["linear.linear_bf12"]
    logits = fused.run()
    assert torch.equal(logits, _forward(_compiled(model, fuse=Attrs(UNFUSED)), T).run())
    # and the BF12 contract still holds across the fusion: the plain model's unfused bits
    plain = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    assert torch.equal(logits, _forward(_compiled(plain, cublas_min_rows=0, fuse=Attrs(UNFUSED)), T).run())
