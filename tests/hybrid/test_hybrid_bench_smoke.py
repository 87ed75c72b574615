"""Run bench/hybrid_bench.py at its tiny shape on the CPU (Triton interpreter), so the script the
lead runs once on the H200 has no Python errors in the stages that set up and time: random
checkpoints made with transformers' config classes, `specir init` + `specir compile --target
h200` of chain and tree, the AR forward against the roofline and the verify-cost curve, JSON and
table written. The bench stage is `specir bench` itself (tests/hybrid/test_hybrid_cli.py)."""
from __future__ import annotations

import json

import pytest
import torch

from tests.helpers.bench_scripts import load_bench_script


def test_hybrid_bench_tiny(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("the CPU smoke test of bench/hybrid_bench.py; on a GPU run the benchmark itself")
    bench = load_bench_script("hybrid_bench")
    out = tmp_path / "out"
    code = bench.main(["--tiny", "--device", "cpu", "--out", str(out), "--work", str(tmp_path / "work"),
                       "--stages", "models,compile,roofline,projection", "--budget-s", "1200",
                       "--builds", "chain,tree,tree-fr"])  # a variant is compiled when named
    data = json.loads((out / "hybrid_bench.json").read_text())
    assert code == 0, {k: v.get("error") for k, v in data["stages"].items()}
    roof = data["stages"]["roofline"]["result"]
    assert roof["ar"][0]["roofline_ms"] > 0 and roof["state_MB_per_request"] > 0
    assert [r["nodes"] for r in roof["verify"]] == [1, 3]
    for n in ("1", "3"):  # the per-kernel breakdown of the AR forward and of the largest tree
        kernels = roof["kernels"][n]
        assert kernels["kernel_ms_per_forward"] > 0 and kernels["groups"][0]["launches"] > 0
    assert set(data["stages"]["compile"]["result"]) == {"chain", "tree", "tree-fr"}
    spec = (tmp_path / "work" / "tiny" / "build-tree-fr" / "pipeline.spec").read_text()
    assert "vocab_scatter" in spec and "ranked_by" in spec  # the tree whose drafter proposes its frequent ids
    assert "AR forward" in (out / "hybrid_bench.md").read_text()
