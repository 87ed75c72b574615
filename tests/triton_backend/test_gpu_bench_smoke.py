"""Run bench/gpu_bench.py end to end at tiny shapes on the CPU (Triton interpreter, timer faked,
no CUDA graphs), so the script the lead runs once on the GPU has no Python errors: every section
runs, the end-to-end rows come from specir.runtime.bench (what `specir bench` runs) and pass token
forcing, and the report files are written."""
from __future__ import annotations

import argparse
import json

from tests.helpers.bench_scripts import load_bench_script


def test_gpu_bench_runs_every_section(tmp_path, capsys):
    import pytest
    import torch
    if torch.cuda.is_available():
        pytest.skip("the CPU smoke test of bench/gpu_bench.py; on a GPU run the benchmark itself")
    bench = load_bench_script("gpu_bench")
    z = bench.Sizes(**bench.SMOKE)
    args = argparse.Namespace(random_8b=True, quick=True)
    data = bench.run(z, args, str(tmp_path), 600.0, ["bench/gpu_bench.py", "--smoke"], fake_timer=True)
    print(bench.summary(data))
    assert not data["errors"], data["errors"]
    assert not data["skipped"], data["skipped"]
    sections = data["sections"]
    assert set(sections) >= {"env", "copy", "models", "ar_step", "breakdown", "verify", "packed_attn", "draft", "e2e",
                             "peers"}
    assert sections["packed_attn"]["bucket"] == 16 and sections["packed_attn"]["configs"]["grouped"]["grid"][0] == 3 * 2
    e2e = sections["e2e"]
    assert e2e["all_lossless"] and {r["pipeline"] for r in e2e["rows"]} == {"chain", "tree", "ngram",
                                                                            "chain-3l", "tree-3l"}
    assert all(r["mismatches"] == 0 and r["ar_tokens_per_s"] > 0 for r in e2e["rows"])
    assert {r["drafter"] for r in e2e["rows"] if r["pipeline"].endswith("-3l")} == {"1B-3L"}
    steps = sections["draft"]["steps"]
    assert {"chain", "tree", "chain-3l", "tree-3l"} <= set(steps) and steps["tree-3l"]["drafter"] == "1B-3L"
    assert "drafter_level_ms" in steps["tree-3l"] and "drafter_one_token_ms" in steps["chain-3l"]
    assert steps["tree-3l-v"]["drafter"] == "1B-3L" and "drafter_level_ms" in steps["tree-3l-v"]
    for name in ("tree-3l", "tree-3l-v"):  # a drafter level's launch groups, its attention and head among them
        groups = {g["group"]: g for g in steps[name]["level_groups"]}
        assert "attention" in groups and all(g["launches"] >= 1 and g["ms"] > 0 for g in groups.values())
    heads = [{g["group"] for g in steps[name]["level_groups"]} for name in ("tree-3l", "tree-3l-v")]
    assert heads[0] != heads[1]  # the narrowed head is another shape
    assert "one drafter tree level by launch group" in (tmp_path / "gpu_bench.md").read_text()
    assert all("error" not in r for r in sections["ar_step"]["torch"]), sections["ar_step"]["torch"]
    assert all(r["unfused_step_ms"] > 0 for r in sections["ar_step"]["triton"])  # the A/B without the fusions too
    assert all("error" not in r for r in sections["peers"].values()), sections["peers"]
    assert json.loads((tmp_path / "gpu_bench.json").read_text())["sections"]
    assert "AR step" in (tmp_path / "gpu_bench.md").read_text()
