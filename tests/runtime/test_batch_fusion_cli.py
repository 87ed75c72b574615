"""`specir compile p.spec -p "tree-verify,batch-fusion"` on every Llama-family pair, and `specir check`
of the fused pipeline at batch sizes 1..8 with mixed prompt lengths: zero mismatches."""
from __future__ import annotations

import json

import pytest

from tests.helpers.checkpoints import FAMILIES
from tests.helpers.specs import write_prompts, write_spec


@pytest.mark.parametrize("family", FAMILIES)
def test_compile_tree_verify_batch_fusion_on_every_family(family, family_checkpoints, tmp_path, specir_cli):
    ckpt = family_checkpoints[family]
    spec = write_spec(tmp_path, family, ckpt, ckpt, k=3)
    code, out, err = specir_cli("compile", spec, "--target", "cpu", "-p", "tree-verify,batch-fusion",
                                "-o", tmp_path / "default")
    assert code == 0, err
    final = (tmp_path / "default" / "pipeline.spec").read_text()
    assert "verify.packed @target" in final and '"batch-fusion"' in final and "batch.budget" in final
    # checked with every request's whole tree (on the CPU's table these tiny pairs would not draft)
    code, out, err = specir_cli("compile", spec, "--target", "cpu", "-p",
                                "tree-verify{budget=8,topk=2},batch-fusion{shrink=false}", "-o", tmp_path / "build")
    assert code == 0, err
    final = (tmp_path / "build" / "pipeline.spec").read_text()
    assert "verify.packed @target" in final and "batch.budget" not in final and "off_at" not in final
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    assert "batch-fusion" in json.dumps(manifest)
    prompts = write_prompts(tmp_path, 6, 96, seed=11)
    code, out, err = specir_cli("check", tmp_path / "build", "--prompts", prompts, "--batch-size", 4,
                                "--max-new-tokens", 10, "--json", "--limit", 0)
    report = json.loads(out)
    assert code == 0 and report["mismatches"] == 0 and report["tokens_checked"] == 60, (report, err)


@pytest.mark.parametrize("batch", range(1, 9))
def test_check_fused_pipeline_at_batch_1_to_8(batch, pair, tmp_path, specir_cli):
    target, drafter = pair
    spec = write_spec(tmp_path, "fused", target, drafter, k=3,
                      passes="tree-verify{budget=12,topk=2},batch-fusion{shrink=false,budget=16}")
    prompts = write_prompts(tmp_path, 8, 259, seed=batch)  # 2 to 12 tokens each
    code, out, err = specir_cli("check", spec, "--prompts", prompts, "--batch-size", batch,
                                "--max-new-tokens", 12, "--json", "--limit", 0)
    report = json.loads(out)
    assert code == 0 and report["mismatches"] == 0 and report["tokens_checked"] == 8 * 12, (report, err)


def test_bench_arrival_rate_forces_every_request(pair, tmp_path, specir_cli):
    """`specir bench --arrival-rate`: Poisson arrivals into 4 slots (prompts of 2..12 tokens, requests
    joining and leaving between steps); every request of the timed run is token-forced."""
    target, drafter = pair
    spec = write_spec(tmp_path, "fused", target, drafter, k=3,
                      passes="tree-verify{budget=12,topk=2},batch-fusion{shrink=false,budget=16}")
    prompts = write_prompts(tmp_path, 10, 259, seed=4)
    code, out, err = specir_cli("bench", spec, "--prompts", prompts, "--limit", 0, "--batch-size", 4,
                                "--arrival-rate", "0,200", "--max-new-tokens", 12, "--check", "--json",
                                "--out", tmp_path / "res")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["arrival_rate"] for r in rows] == [0.0, 200.0]
    for r in rows:
        assert r["requests"] == 10 and r["tokens"] == 120 and r["mismatches"] == 0 and r["agree_with_ar"] == 1.0
        assert 1.0 < r["mean_live"] <= 4.0 and r["tau"] > 1.0
    assert json.loads((tmp_path / "res" / "bench.json").read_text())["mode"] == "poisson arrivals"


def test_bench_arrival_rate_bad_value(pair, tmp_path, specir_cli):
    target, drafter = pair
    spec = write_spec(tmp_path, "fused", target, drafter, k=3, passes="batch-fusion{shrink=false}")
    code, out, err = specir_cli("bench", spec, "--arrival-rate", "fast")
    assert code != 0 and "--arrival-rate must be" in err and "hint" in err and "Traceback" not in err


def test_opt_target_prices_the_shrink_table_as_compile_would(tmp_path, specir_cli):
    """`specir opt -p batch-fusion --target T` prints the IR `specir compile --target T` builds (the
    shrink table priced for T); an unknown target is one clear error."""
    code, spec, err = specir_cli("init")
    assert code == 0, err
    (tmp_path / "p.spec").write_text(spec)
    tables = {}
    for target in ("cpu", "h200"):
        code, out, err = specir_cli("opt", tmp_path / "p.spec", "-p", "batch-fusion", "--target", target)
        assert code == 0, err
        tables[target] = next(line for line in out.splitlines() if "batch.budget" in line)
        code, _, err = specir_cli("compile", tmp_path / "p.spec", "--target", target, "-p", "batch-fusion",
                                  "-o", tmp_path / f"build-{target}")
        assert code == 0, err
        built = (tmp_path / f"build-{target}" / "pipeline.spec").read_text()
        assert tables[target].strip() in built, (target, tables[target])
        # on the CPU the shipped chain pays at no batch size (its per-op cost): compile says the build
        # decodes as AR does, and the modelled step it prints is AR's
        off = target == "cpu"
        assert ("decodes as its AR pipeline does" in err) == off and ("(AR's: drafting is off" in err) == off, err
        manifest = json.loads((tmp_path / f"build-{target}" / "manifest.json").read_text())
        assert bool(manifest["cost_model"].get("drafting_off")) == off
    assert tables["cpu"] != tables["h200"] and "tokens = [0]" in tables["cpu"]
    code, out, err = specir_cli("opt", tmp_path / "p.spec", "-p", "batch-fusion", "--target", "h300")
    assert code != 0 and "unknown target 'h300'" in err and "Traceback" not in err, err
