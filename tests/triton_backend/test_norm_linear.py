"""The norm_linear fusion (passes/fusion.py; program.py, forward.py): an rms_norm read only by one
linear group runs in that group's prologue and a residual add of a lone linear's result in that
linear's epilogue, so a decoder layer loses both add + norm launches (and the final norm goes into
the LM head); its option prints in the IR; fused and unfused forwards give the same logits bits
with bf16 and BF12 weights, at one row (GEMV) and several (GEMM), with fp32 activations; beyond one
row (the Triton GEMM: fused_parts.py) and where the rows route the linears to cuBLAS the norms and
adds run as the unfused program's launches (add_rms_norm where an epilogue's add feeds a prologue's
norm), under the interpreter without a GPU."""
from __future__ import annotations

import pytest
import torch

from specir.ir.nodes import Attrs
from tests.triton_backend.pipelines import BASE_FUSIONS, fusion_pass, pipeline
from tests.triton_backend.test_gemm_route import _forward
from tests.triton_backend.test_swiglu_prologue import SEPARATE, _compiled, mlp_pair, packed_pipeline  # noqa: F401

UNFUSED = BASE_FUSIONS
NORM_LINEAR = {**UNFUSED, "norm_linear": True}
BOTH = {**NORM_LINEAR, "swiglu_linear": True}
FUSED = ["embed", "linear", "rope_kv_write", "attention", "linear", "linear", "swiglu", "linear", "linear"]


def _unfused(model, **attrs):
    """The model without the fusion, its norms in the fusion's order (`fixed_order`, as a model with
    the fusion runs every norm it does not fold): the bits the fused forwards must equal."""
    compiled = _compiled(model, fuse=Attrs(UNFUSED), **attrs)
    norms = [launch for launch in compiled.program.launches if launch.kind in ("rms_norm", "add_rms_norm")]
    assert norms and not any(launch.attrs["fixed_order"] for launch in norms)
    for launch in norms:
        launch.attrs["fixed_order"] = True
    return compiled


def test_the_option_prints_and_a_layer_loses_its_add_norm_launches(tiny_pair):
    from specir.backends.triton.program import plan_program
    from specir.ir.printer import print_pipeline
    from specir.pass_infra import PassManager, build_passes
    p = pipeline("chain", *tiny_pair, dtype="bf16")
    on = PassManager(build_passes(fusion_pass(norm_linear=True))).run(p)
    assert "norm_linear = true" in print_pipeline(on)
    fused = plan_program(on.model("target"))
    assert [launch.kind for launch in fused.launches] == FUSED
    assert len(SEPARATE) - len(FUSED) == 3  # the input norm, the layer's two add + norm launches
    by_out = {launch.outs[0]: launch for launch in fused.launches}
    qkv = next(launch for launch in fused.launches if launch.attrs.get("prologue") == "rms_norm")
    embedded = fused.launches[0].outs
    assert qkv.attrs["norm_weight"].endswith("input_layernorm.weight") and qkv.ins == embedded
    o_proj = [launch for launch in fused.launches if launch.attrs.get("epilogue") == "add"][0]
    assert (o_proj.attrs["residual_value"],) == embedded and o_proj.ins[-1:] == embedded
    assert o_proj.ops[-1] == o_proj.outs[0] and o_proj.attrs["epilogue_value"] in o_proj.ops
    head = fused.launches[-1]
    assert head.attrs.get("prologue") == "rms_norm" and head.outs == (fused.result,)
    assert by_out[head.ins[0]].attrs.get("epilogue") == "add"  # the down projection wrote the residual
    norms = lambda program: [x.attrs["fixed_order"] for x in program.launches if "norm" in x.kind]  # noqa: E731
    base = p.model("target").with_attrs(fuse=Attrs(UNFUSED))
    assert norms(plan_program(base)) == [False, False, False]  # without it: the fast order
    both = plan_program(on.model("target").with_attrs(fuse=Attrs(BOTH)))
    assert len(both.launches) == len(FUSED) - 1  # and the swiglu in the down projection's prologue


def test_a_norm_with_another_reader_stays_separate(tiny_pair):
    from dataclasses import replace
    from specir.backends.triton.program import plan_program
    from specir.ir.nodes import Op
    model = pipeline("chain", *tiny_pair, dtype="bf16").model("target").with_attrs(fuse=Attrs(NORM_LINEAR))
    ops = list(model.graph.ops)
    norm = next(op for op in ops if op.name == "rms_norm")
    ops.append(Op("add", (norm.result, norm.result), result="%extra", type=norm.type))
    program = plan_program(replace(model, graph=replace(model.graph, ops=tuple(ops))))
    kinds = [launch.kind for launch in program.launches]
    assert kinds[:2] == ["embed", "rms_norm"]
    assert [launch.attrs.get("prologue") for launch in program.launches].count("rms_norm") == 2  # gate/up, head


@pytest.mark.parametrize("T", [1, 3])
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("fuse", [NORM_LINEAR, BOTH], ids=["norm_linear", "with_swiglu"])
def test_fused_and_unfused_logits_are_the_same_bits(mlp_pair, dtype, T, fuse):
    """One row (the GEMV) folds the norms and adds; more rows (the Triton GEMM) run them apart as
    without the fusion, in the norm kernel's own order (fused_parts.py), and keep a swiglu prologue."""
    model = pipeline("chain", *mlp_pair, dtype=dtype).model("target")
    fused = _forward(_compiled(model, cublas_min_rows=0, fuse=Attrs(fuse)), T)
    kernels = [c["kernel"] for c in fused.configs]
    folded = [c.get("epilogue") for c in fused.configs].count("add"), \
        [c.get("prologue") for c in fused.configs].count("rms_norm")
    if T == 1:
        assert not set(kernels) & {"norm.rms_norm", "norm.add_rms_norm", "add.add"}
        assert folded == (2, 3)
        separate = _forward(_unfused(model, cublas_min_rows=0), T)
    else:
        assert kernels.count("norm.rms_norm") == 1 and kernels.count("norm.add_rms_norm") == 2
        assert folded == (0, 0) and kernels.count("linear.linear_bf16") == 5
        separate = _forward(_compiled(model, cublas_min_rows=0, fuse=Attrs(UNFUSED)), T)
    from specir.backends.triton.launch_configs import launch_configs
    from specir.targets import get_target
    listed = launch_configs(_compiled(model, cublas_min_rows=0, fuse=Attrs(fuse)).program, get_target("h200"), 1, T, 64)
    assert kernels == [row["kernel"] for row in listed if row["kernel"] != "argmax.argmax"]  # in launch order
    assert [c.get("prologue") for c in fused.configs].count("swiglu") == (fuse is BOTH)
    assert torch.equal(fused.run(), separate.run())


def test_cublas_routed_linears_run_the_norm_and_the_add_as_without_the_fusion(mlp_pair):
    """... in the norm kernel's own order too (a forward that folds no norm has no fixed order to keep)."""
    model = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    fused = _forward(_compiled(model, cublas_min_rows=8, fuse=Attrs(NORM_LINEAR)), 9)  # 9 rows: cuBLAS
    kernels = [c["kernel"] for c in fused.configs]
    separate = _forward(_compiled(model, cublas_min_rows=8, fuse=Attrs(UNFUSED)), 9)
    # the same launches as without the fusion: each add with the norm after it in one add_rms_norm launch
    assert sorted(kernels) == sorted(c["kernel"] for c in separate.configs)
    assert kernels.count("norm.rms_norm") == 1 and kernels.count("norm.add_rms_norm") == 2
    assert torch.equal(fused.run(), separate.run())
    narrow = _forward(_compiled(model, cublas_min_rows=8, fuse=Attrs(NORM_LINEAR)), 1)  # the decode step: fused
    assert not {c["kernel"] for c in narrow.configs} & {"norm.rms_norm", "add.add"}


@pytest.mark.parametrize("T", [1, 3])
def test_packed_fused_and_unfused_logits_are_the_same_bits(mlp_pair, packed_pipeline, T):  # noqa: F811
    model = packed_pipeline.model("target")
    fused = _forward(_compiled(model, fuse=Attrs(BOTH)), T)
    in_prologue = {c["kernel"] for c in fused.configs if c.get("prologue") == "rms_norm"}
    assert in_prologue == ({"linear.linear_bf12"} if T == 1 else set())  # beyond one row: apart
    logits = fused.run()
    unfused = _unfused if T == 1 else lambda m, **attrs: _compiled(m, fuse=Attrs(UNFUSED), **attrs)
    assert torch.equal(logits, _forward(unfused(model), T).run())
    plain = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    assert torch.equal(logits, _forward(unfused(plain, cublas_min_rows=0), T).run())


@pytest.mark.parametrize("T", [1, 9])
def test_a_prefill_writes_the_same_cache(mlp_pair, T):
    """A cache-only forward (no logits: the final norm's consumer, the LM head, does not run) with the
    fusion writes the KV cache bit for bit as without it, at a Triton and a cuBLAS row count."""
    from specir.backends.triton.forward import ForwardInputs
    model = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    caches = []
    for fused in (True, False):
        if fused:
            compiled = _compiled(model, cublas_min_rows=8, fuse=Attrs(NORM_LINEAR))
        else:  # at 9 rows (cuBLAS) the fused forward folds no norm: the norm kernel's own order, as unfused
            compiled = _unfused(model, cublas_min_rows=8) if T == 1 else \
                _compiled(model, cublas_min_rows=8, fuse=Attrs(UNFUSED))
        cache = compiled.new_cache(1, 64)
        inputs = ForwardInputs.allocate(1, T, compiled.device)
        inputs.ids.copy_(torch.arange(T)[None] * 7 % 250 + 3)
        inputs.pos.copy_(torch.arange(T)[None])
        inputs.lens.fill_(0)
        forward = compiled.forward(cache, inputs, logits=False)
        assert forward.run() is None
        caches.append(cache.layer(0))
    assert all(torch.equal(a, b) for a, b in zip(caches[0], caches[1]))


def test_launch_configs_and_ptx_list_what_a_fused_build_launches(tiny_pair, tmp_path, specir_cli):
    """build/launch_configs.json lists a cuBLAS-width forward's separate norm and add launches (each IR
    value implemented once), a GEMV-width one none; `--emit-ptx` compiles the fused build."""
    import os

    import triton
    from specir.backends.triton.launch_configs import launch_configs
    from specir.backends.triton.program import plan_program
    from specir.ir.printer import print_pipeline
    from specir.targets import get_target
    model = pipeline("chain", *tiny_pair, dtype="bf16").model("target").with_attrs(
        fuse=Attrs(NORM_LINEAR), cublas_min_rows=8)
    program = plan_program(model)
    wide = launch_configs(program, get_target("h200"), 1, 9, 64)
    kernels = [row["kernel"] for row in wide]
    assert kernels.count("norm.rms_norm") == 1 and kernels.count("norm.add_rms_norm") == 2
    implemented = [v for row in wide for v in row["implements"]]
    assert len(implemented) == len(set(implemented))
    narrow = launch_configs(program, get_target("h200"), 1, 1, 64)
    assert not {"norm.rms_norm", "norm.add_rms_norm", "add.add"} & {row["kernel"] for row in narrow}
    assert [row.get("epilogue") for row in narrow].count("add") == 2
    gemm = launch_configs(program, get_target("h200"), 1, 3, 64)  # Triton's GEMM: the norms and adds apart
    kernels = [row["kernel"] for row in gemm]
    assert kernels.count("norm.rms_norm") == 1 and kernels.count("norm.add_rms_norm") == 2
    assert not [row for row in gemm if row.get("prologue") == "rms_norm" or row.get("epilogue") == "add"]
    implemented = [v for row in gemm for v in row["implements"]]
    assert len(implemented) == len(set(implemented)) and set(implemented) == set(v for row in narrow
                                                                                 for v in row["implements"])
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    if not os.path.exists(ptxas):
        pytest.skip("Triton's bundled ptxas is missing")
    spec = tmp_path / "ar.spec"
    spec.write_text(print_pipeline(pipeline("ar", *tiny_pair, dtype="bf16")))
    code, _, err = specir_cli("compile", spec, "--target", "h100", "-o", tmp_path / "build", "--emit-ptx",
                              "-p", "fusion{norm_linear=true}")
    assert code == 0, err
    import json
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    with_ptx = {k["kernel"].rsplit(".", 1)[-1]: k["ptx"] for k in manifest["kernels"] if k.get("ptx")}
    assert "linear_bf16" in with_ptx, manifest["notes"]
    text = (tmp_path / "build" / with_ptx["linear_bf16"][0]).read_text()
    assert ".target sm_90" in text and ".entry gemv_kernel" in text
