"""`specir compile --target h200` with the Triton backend (no GPU needed): the build holds the
kernel sources, per-shape launch configurations and a manifest listing the kernels; the session
picks the backend's step; sampling and dynamic trees run on the device like every other step."""
from __future__ import annotations

import json

import pytest

from tests.triton_backend.pipelines import pipeline


def test_compile_for_h200_writes_kernels_and_configs(tiny_pair, tmp_path, specir_cli):
    from specir.ir.printer import print_pipeline
    target, drafter = tiny_pair
    spec = tmp_path / "tree.spec"
    spec.write_text(print_pipeline(pipeline("tree", target, drafter, dtype="bf16")))
    code, _, err = specir_cli("compile", spec, "--target", "h200", "-o", tmp_path / "build")
    assert code == 0, err
    build = tmp_path / "build"
    manifest = json.loads((build / "manifest.json").read_text())
    assert manifest["backend"] == "triton" and manifest["target"] == "h200"
    kernels = {k["kernel"].rsplit(".", 2)[-2] + "." + k["kernel"].rsplit(".", 1)[-1]: k for k in manifest["kernels"]}
    assert set(kernels) >= {"linear.linear_bf16", "rope.rope_kv_write", "attention.attention", "norm.add_rms_norm",
                            "argmax.argmax", "accept.greedy_accept_tree", "kv_cache.kv_compact",
                            "ranking.top_log_probs", "tree_expand.expand_tree", "tree_nodes.tree_nodes"}
    assert kernels["tree_expand.expand_tree"]["op"] == "draft.tree"  # the hooks draft.tree's lowering calls
    assert "ranking.log_prob_of" not in kernels  # draft.chain's, not in this step
    for k in manifest["kernels"]:
        assert all((build / s).is_file() for s in k["sources"]), k
    configs = json.loads((build / "launch_configs.json").read_text())
    assert configs["step"] == [{"ops": ["draft.tree", "verify.tree", "accept.sample", "commit"], "host": False}]
    verify = configs["models"]["target"]["verify"]
    assert verify["T"] == 5  # budget 4 + the pending token
    linear = [r for r in verify["launches"] if r["kernel"] == "linear.linear_bf16"]
    assert linear and all({"block_n", "split", "num_warps", "num_stages"} <= set(r["config"]) for r in linear)
    attention = [r for r in verify["launches"] if r["kernel"] == "attention.attention"]
    assert attention and all(r["tree_mask"] and r["config"]["num_splits"] >= 1 for r in attention)
    assert set(configs["models"]["drafter"]) == {"catch-up", "tree-level"}
    # fused launches: one GEMV for q/k/v, one for gate/up; rope + kv write in one launch
    qkv = [r for r in linear if len(r["implements"]) == 3]
    assert qkv and qkv[0]["n"] == 64 + 2 * 32


def test_session_uses_the_backends_step(tiny_pair, device):
    from specir.backends.triton.step_backend import TritonStepBackend
    from specir.runtime import session
    from specir.targets import get_target
    target, drafter = tiny_pair
    assert session._backend_for(get_target("h200")) in ("triton", "reference")  # triton only with CUDA
    engine = session.make_engine(pipeline("ar", target, drafter), "triton", device, None)
    assert isinstance(engine.backend, TritonStepBackend)
    assert engine.program.describe() == [{"ops": ["verify.chain", "accept.greedy", "commit"], "host": False}]


def test_sampling_runs_the_same_device_step_and_is_seeded(tiny_pair, device):
    from specir.runtime.session import make_engine
    target, drafter = tiny_pair
    engine = make_engine(pipeline("chain", target, drafter), "triton", device, None)
    assert all(not seg["host"] for seg in engine.program.describe())
    first = engine.generate([[1, 2, 3]], 3, temperature=0.8, seed=7)[0]
    assert len(first.tokens) == 3 == sum(first.accept_lengths) and all(0 <= t < 259 for t in first.tokens)
    again = engine.generate([[1, 2, 3]], 3, temperature=0.8, seed=7)[0]
    assert again.tokens == first.tokens  # seeded


def test_dynamic_trees_run_on_the_device_and_are_lossless(tiny_pair, device):
    from specir.pass_infra import PassManager, build_passes
    from specir.runtime.session import make_engine
    from tests.triton_backend.pipelines import PROMPTS, forced
    target, drafter = tiny_pair
    p = PassManager(build_passes("tree-verify{budget=4,topk=2,depth=2,expand=dynamic,threshold=0.1}")).run(
        pipeline("chain", target, drafter))
    engine = make_engine(p, "triton", device, None)
    assert all(not seg["host"] for seg in engine.program.describe())
    results = engine.generate(PROMPTS, 5)
    report = forced(p, target, PROMPTS, [r.tokens for r in results])
    assert report.checked == 10 and report.mismatches == 0, report.as_dict()


def test_ptx_for_sm90_without_a_gpu(tiny_pair, tmp_path, specir_cli, monkeypatch):
    import os

    import triton
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    if not os.path.exists(ptxas):
        pytest.skip("Triton's bundled ptxas is missing")
    from specir.ir.printer import print_pipeline
    target, drafter = tiny_pair
    spec = tmp_path / "ar.spec"
    spec.write_text(print_pipeline(pipeline("ar", target, drafter, dtype="bf16")))
    code, _, err = specir_cli("compile", spec, "--target", "h100", "-o", tmp_path / "build", "--emit-ptx")
    assert code == 0, err
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    with_ptx = {k["kernel"].rsplit(".", 1)[-1]: k["ptx"] for k in manifest["kernels"] if k.get("ptx")}
    # (no rope_kv_write: by default the q|k|v GEMV runs the rope + KV write in its epilogue, fusion{linear_rope_kv})
    assert {"linear_bf16", "attention", "argmax", "greedy_accept_tree"} <= set(with_ptx), manifest["notes"]
    text = (tmp_path / "build" / with_ptx["linear_bf16"][0]).read_text()
    assert ".target sm_90" in text and ".entry gemv_kernel" in text


def test_a_packed_verify_records_its_grouped_attention(tiny_pair, tmp_path, specir_cli):
    """batch-fusion's packed verify: launch_configs.json marks the forward packed and records the
    attention as the runtime launches it, grouped by request (KH more programs for the pad rows)."""
    from specir.ir.printer import print_pipeline
    from specir.pass_infra import PassManager, build_passes
    target, drafter = tiny_pair
    spec = tmp_path / "fused.spec"
    fused = PassManager(build_passes("batch-fusion{shrink=false}")).run(pipeline("tree", target, drafter, dtype="bf16"))
    spec.write_text(print_pipeline(fused))
    code, _, err = specir_cli("compile", spec, "--target", "h200", "-o", tmp_path / "build")
    assert code == 0, err
    verify = json.loads((tmp_path / "build" / "launch_configs.json").read_text())["models"]["target"]["verify"]
    assert verify["packed"] and verify["T"] == 5
    attention = [r for r in verify["launches"] if r["kernel"] == "attention.attention"]
    assert attention and all(r["tree_mask"] and r["config"]["grouped"] for r in attention)
    assert all(r["config"]["grid"][0] == (1 + 1) * 2 for r in attention)  # (B + 1) x 2 kv heads
