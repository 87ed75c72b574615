"""bench/ranking_sweep.py at small shapes under the interpreter (timer faked): every slicing it times ranks
exactly as the rule does, so a GPU call never times a wrong launch."""
import torch

from tests.helpers.bench_scripts import load_bench_script

sweep = load_bench_script("ranking_sweep")


def test_every_slicing_ranks_as_the_rule(seed):
    results = sweep.run({"small 3x3000 k5": (3, 3000, 5), "k1 1x700": (1, 700, 1)},
                        lambda fn: (fn(), 1e-6)[1], torch.device("cpu"))
    for r in results.values():
        assert r["candidates"] and all(c["same"] for c in r["candidates"]), r
    assert {c["chunk"] for c in results["small 3x3000 k5"]["candidates"]} >= {256, 1024, 4096}
    assert "| small 3x3000 k5 |" in sweep.table(results)
