"""bench/bf12_step.py end to end at a tiny shape on the CPU (Triton interpreter): every code path
of the GPU benchmark runs, and the bf16 and BF12 steps give the same bits (raw rows included, BF12's GEMVs
on a persistent grid)."""
from __future__ import annotations

import os

import pytest

from tests.helpers.bench_scripts import load_bench_script


def test_bf12_step_bench_runs_and_outputs_are_bit_identical(tmp_path, capsys):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("CPU smoke test; on a GPU run the benchmark itself")
    bench = load_bench_script("bf12_step")
    code = bench.main(["--out", str(tmp_path), "--shape", "tiny", "--device", "cpu", "--context", "8",
                       "--replays", "1", "--rounds", "1", "--raw-rows", "1",
                       "--variant", "bf12:persistent=2"])
    out = capsys.readouterr().out
    assert code == 0
    import json
    result = json.loads((tmp_path / "bf12_step.json").read_text())
    assert result["raw_rows"] == 5  # one planted per matrix: qkv, o, gate_up, down, lm_head
    assert result["variants"] == {"bf12": {"persistent": 2}}  # BF12's launches persistent, bf16's plain
    assert all(c["bitwise_equal"] and c["finite_logits"] for c in result["checks"].values())
    assert {(r["variant"], r["format"]) for r in result["results"]} == \
        {(v, f) for v in ("step", "gemvs") for f in ("bf16", "bf12")}
    assert out.strip().splitlines()[-1].startswith("| gemvs | bf12 |")
