"""Run bench/triton_kernels.py end to end at tiny shapes in the interpreter (timer faked), so the
script the lead runs on the GPU has no Python errors and its built-in correctness checks pass."""

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_bench():
    spec = importlib.util.spec_from_file_location("triton_kernels_bench", os.path.join(ROOT, "bench", "triton_kernels.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module        # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_bench_script_runs_and_checks_pass(seed, capsys):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("smoke test of the CPU path; on a GPU run the bench itself")
    bench = _load_bench()

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
