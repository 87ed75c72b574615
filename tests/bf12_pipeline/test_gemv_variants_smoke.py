"""bench/gemv_variants.py at a tiny shape in the Triton interpreter: every variant's bits equal
the bf16 kernel's, and variants skipped by the time budget (or sharing a skipped variant's
configuration) are reported as skipped rather than crashing the run."""
from __future__ import annotations

import json
import os

import pytest

from tests.helpers.bench_scripts import load_bench_script


@pytest.fixture
def bench():
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("CPU smoke test; on a GPU run the benchmark itself")
    return load_bench_script("gemv_variants")


def test_every_variant_runs_and_matches_bf16_bits(bench, tmp_path):
    assert bench.main(["--out", str(tmp_path), "--cpu-smoke"]) == 0
    rows = json.loads((tmp_path / "gemv_variants.json").read_text())["rows"]
    assert {r["variant"] for r in rows} == set(bench.VARIANTS)
    assert all(r["bits_equal_bf16"] for r in rows), [r for r in rows if not r.get("bits_equal_bf16")]


def test_an_exhausted_budget_skips_every_variant(bench, tmp_path):
    assert bench.main(["--out", str(tmp_path), "--cpu-smoke", "--budget", "0"]) == 0
    rows = json.loads((tmp_path / "gemv_variants.json").read_text())["rows"]
    assert len(rows) == len(bench.VARIANTS)
    assert all(r["skipped"] == "time budget" for r in rows)
    assert any("same_as" in r for r in rows)  # the bookkeeping path that used to raise KeyError
