"""bench/gemm_tune.py --apply: a measured winner (bits equal, faster by more than the margin) becomes a
GEMM_TILES entry under its row band; a slower one or one whose bits differ does not."""
import ast
import json
import shutil

from tests.helpers.bench_scripts import load_bench_script

gemm_tune = load_bench_script("gemm_tune")

BEST = {"kind": "gemm", "block_n": 128, "groups": 1, "split": 2, "block_m": 16, "num_warps": 8, "num_stages": 3,
        "swap_ab": True, "m_fastest": True, "prmt": True}


def entry(n, table_us, best_us, bits=True, m=65):
    return {"shape": "s", "N": n, "K": 4096, "M": m, "bits_equal": bits, "bf12_table_us": table_us,
            "bf12_best_us": best_us, "best": BEST}


def test_apply_writes_the_winners_under_their_row_band(tmp_path):
    from specir.backends.triton.kernels import linear_config

    measured = tmp_path / "gemm_tune.json"
    measured.write_text(json.dumps({"entries": [entry(28672, 100.0, 60.0), entry(4096, 100.0, 99.0),
                                                entry(6144, 100.0, 50.0, bits=False), entry(1024, 50.0, 20.0, m=40)]}))
    source = tmp_path / "linear_config.py"
    shutil.copy(linear_config.__file__, source)
    before = source.read_text()
    assert gemm_tune.apply(measured, 0.03, source) == 0
    after = source.read_text()
    outside = lambda text: text.split("GEMM_TILES: dict")[0] + text.split("\nGEMM_FIELDS")[1]  # noqa: E731
    assert outside(after) == outside(before)   # nothing but the table changes
    tree = ast.parse(after)
    tiles = next(ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "GEMM_TILES")
    fields = {f: BEST[f] for f in linear_config.GEMM_FIELDS}
    assert tiles == {**linear_config.GEMM_TILES, (128, 28672, 4096): fields, (64, 1024, 4096): fields}
    assert gemm_tune.apply(measured, 0.03, source) == 0   # idempotent
    assert source.read_text() == after


def test_apply_writes_nothing_without_a_winner_and_refuses_two_counts_of_one_band(tmp_path):
    from specir.backends.triton.kernels import linear_config

    source = tmp_path / "linear_config.py"
    shutil.copy(linear_config.__file__, source)
    before = source.read_text()
    measured = tmp_path / "gemm_tune.json"
    measured.write_text(json.dumps({"entries": [entry(4096, 100.0, 99.0)]}))
    assert gemm_tune.apply(measured, 0.03, source) == 0 and source.read_text() == before
    measured.write_text(json.dumps({"entries": [entry(4096, 100.0, 50.0, m=65), entry(4096, 100.0, 50.0, m=100)]}))
    assert gemm_tune.apply(measured, 0.03, source) == 1 and source.read_text() == before
