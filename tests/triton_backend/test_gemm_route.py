"""Which library runs a linear group (gemm_route.py): bf16 groups of forwards with M >= 8 rows run
cuBLAS (torch.nn.functional.linear), smaller M the Triton kernel; models with packed BF12 weights
keep Triton everywhere; the choice is what the runtime records and what launch_configs.json and
the manifest list. On a CPU torch's CPU GEMM stands in for cuBLAS."""
from __future__ import annotations

import dataclasses
import json

import torch

from tests.triton_backend.pipelines import pipeline


def _forward(model, T: int, lens: int = 4):
    from specir.backends.triton.forward import ForwardInputs
    cache = model.new_cache(1, 64)
    inputs = ForwardInputs.allocate(1, T, model.device)
    inputs.ids.copy_(torch.arange(T)[None] * 7 % 250 + 3)
    inputs.pos.copy_(torch.arange(T)[None] + lens)
    inputs.lens.fill_(lens)
    return model.forward(cache, inputs)


def _compiled(tiny_pair, dtype="bf16", **attrs):
    from specir.backends.triton.compiled_model import CompiledModel
    from specir.runtime.weights import load_weights
    target, drafter = tiny_pair
    m = pipeline("chain", target, drafter, dtype=dtype).model("target")
    m = m.with_attrs(**attrs) if attrs else m
    from tests.triton_backend.conftest import DEVICE
    return CompiledModel(m, load_weights(m, DEVICE), DEVICE)


def test_wide_bf16_forwards_run_cublas_and_match_triton(tiny_pair):
    model = _compiled(tiny_pair)
    wide = _forward(model, 9)
    kernels = {c["kernel"] for c in wide.configs if c.get("m") == 9}
    assert kernels == {"cublas.linear"}, wide.configs
    narrow = _forward(model, 5)
    assert {c["kernel"] for c in narrow.configs if "m" in c} == {"linear.linear_bf16"}
    a = wide.run().clone()
    triton_only = _forward(_compiled(tiny_pair, cublas_min_rows=0), 9)  # the IR's policy: Triton everywhere
    assert {c["kernel"] for c in triton_only.configs if "m" in c} == {"linear.linear_bf16"}
    b = triton_only.run()
    assert torch.allclose(a.float(), b.float(), atol=0.05 * float(b.float().abs().max()))
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.8


def test_f32_activations_and_packed_models_keep_triton(tiny_pair):
    from specir.backends.triton.gemm_route import cublas_min_rows, uses_cublas
    from specir.backends.triton.program import Launch, plan_program
    f32 = _compiled(tiny_pair, "f32")
    assert not any(uses_cublas(f32.program, launch, 64) for launch in f32.program.launches)
    target, drafter = tiny_pair
    plain = pipeline("chain", target, drafter, dtype="bf16")
    program = plan_program(plain.model("target"))
    assert cublas_min_rows(program) == 8
    # a model with a packed matrix (the tiny pair is too small for pack-weights to pack one)
    with_packed = dataclasses.replace(program, launches=program.launches + [Launch("packed_linear", ("y",), ("x",))])
    assert cublas_min_rows(with_packed) is None
    assert not any(uses_cublas(with_packed, launch, 64) for launch in with_packed.launches)


def test_launch_configs_and_manifest_name_cublas(tiny_pair, tmp_path, specir_cli):
    from specir.ir.printer import print_pipeline
    target, drafter = tiny_pair
    spec = tmp_path / "tree.spec"
    p = pipeline("chain", target, drafter, dtype="bf16")
    from specir.pass_infra import PassManager, build_passes
    p = PassManager(build_passes("tree-verify{budget=12,topk=3,depth=4}")).run(p)
    spec.write_text(print_pipeline(p))
    code, _, err = specir_cli("compile", spec, "--target", "h200", "-o", tmp_path / "build")
    assert code == 0, err
    configs = json.loads((tmp_path / "build" / "launch_configs.json").read_text())
    verify = configs["models"]["target"]["verify"]
    assert verify["T"] == 13
    linear = [r for r in verify["launches"] if "m" in r]
    assert linear and all(r["kernel"] == "cublas.linear" and r["config"]["library"] == "cuBLAS" for r in linear)
    assert "cublas_min_rows = 8" in (tmp_path / "build" / "pipeline.spec").read_text()  # the policy, printed
    catch_up = configs["models"]["drafter"]["catch-up"]
    assert catch_up["T"] < 8 and all(r["kernel"] == "linear.linear_bf16" for r in catch_up["launches"] if "m" in r)
    attention = [r for r in verify["launches"] if r["kernel"] == "attention.attention"]
    assert attention and all(r["config"]["launches"] == 1 for r in attention)
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    cublas = [k for k in manifest["kernels"] if k.get("backend") == "cublas"]
    assert len(cublas) == 1 and cublas[0]["kernel"] == "torch.nn.functional.linear"
    assert "target" in cublas[0]["forwards"]
    assert any("run cuBLAS" in note for note in manifest["notes"])
