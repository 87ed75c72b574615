"""Run bench/triton_kernels.py end to end at tiny shapes in the interpreter (timer faked), so the
script the lead runs on the GPU has no Python errors and its built-in correctness checks pass."""

import os

import pytest

from tests.helpers.bench_scripts import load_bench_script


def test_bench_script_runs_and_checks_pass(seed, capsys):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("smoke test of the CPU path; on a GPU run the bench itself")
    bench = load_bench_script("triton_kernels")

    def call_once(fn):
        fn()
        return 1.0

    result = bench.run(bench.Sizes(**bench.SMOKE), quick=True, timer=call_once)
    bench.print_table(result)
    rows = result["results"]
    assert rows and not [r for r in rows if "error" in r], [r for r in rows if "error" in r]
    bad = {f"{r['kernel']} {r['shape']}": r["max_rel_err"] for r in rows if r.get("max_rel_err", 0) > 1e-2}
    assert not bad, bad
    kernels = {r["kernel"] for r in rows}
    assert kernels >= {"rms_norm", "add_rms_norm", "silu_mul", "embedding", "rope", "rope_kv_write", "kv_write",
                       "kv_compact", "attention", "greedy_accept", "argmax"}


def test_the_draft_step_kernels_bench_checks_every_kernel_against_torch(seed, capsys):
    """bench/draft_step_kernels.py at a small vocabulary in the interpreter: every row's check
    (ranking, log-probability, expansion, nodes: the kernel against torch) passes."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("smoke test of the CPU path; on a GPU run the bench itself")
    bench = load_bench_script("draft_step_kernels")
    assert bench.main(["--vocab", "3000", "--batch-sizes", "1,2", "--depth", "3", "--topk", "4", "--budget", "12"]) == 0
    table = capsys.readouterr().out
    assert all(what in table for what in ("rank", "log-prob", "expand", "nodes"))
