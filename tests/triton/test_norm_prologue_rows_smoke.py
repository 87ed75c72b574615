"""bench/norm_prologue_rows.py at a tiny shape on the CPU (Triton interpreter): the GEMM with the RMSNorm
prologue gives the bits of the norm (fixed order) then the GEMM, at each row count the benchmark times."""
from __future__ import annotations

import json
import os

import pytest

from tests.helpers.bench_scripts import load_bench_script


def test_norm_prologue_rows_runs_and_the_folded_gemm_equals_the_launches_apart(tmp_path, capsys):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("CPU smoke test; on a GPU run the benchmark itself")
    bench = load_bench_script("norm_prologue_rows")
    assert bench.main(["--out", str(tmp_path), "--device", "cpu", "--rows", "2,5"]) == 0
    rows = json.loads((tmp_path / "norm_prologue_rows.json").read_text())["rows"]
    assert [(r["m"], r["bits_equal"]) for r in rows] == [(2, True), (5, True)]
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("| tiny 96x256 | 5 |")
