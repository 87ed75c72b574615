"""The attention kernel's measured launch table (kernels/attention.py ATTENTION_TILES) and the sweep that
writes it (bench/attention_tune.py): a listed tile sets the per-row launch's fields the call leaves open,
never a grouped launch's; a launch with a tile's fields still computes the reference's attention; the
sweep's dry run (a CPU, the interpreter) checks every launch against the reference and --apply writes a
case's winner under its row band and head_dim, a loser nowhere."""
import ast
import json
import shutil
import time

import pytest
import torch

from specir import kernel_reference as ref
from specir.backends.triton.kernels import attention as attention_module
from specir.backends.triton.kernels.attention import attention, attention_config, attention_row_band
from tests.helpers.bench_scripts import load_bench_script

attention_tune = load_bench_script("attention_tune")

TILE = {"block_m": 16, "block_n": 32, "num_warps": 4, "min_chunk": 32}


def test_a_listed_tile_sets_the_per_row_launch_only(monkeypatch):
    monkeypatch.setattr(attention_module, "ATTENTION_TILES", {})
    rule = attention_config(1, 65, 32, 8, 128, 4096, sm=132)
    assert rule["min_chunk"] == 1088 and attention_row_band(65 * 4) == 512  # one split below 1088 keys
    monkeypatch.setitem(attention_module.ATTENTION_TILES, (512, 128), dict(TILE, min_chunk=128))
    tuned = attention_config(1, 65, 32, 8, 128, 4096, sm=132)
    assert (tuned["block_m"], tuned["block_n"], tuned["num_warps"], tuned["min_chunk"]) == (16, 32, 4, 128)
    assert tuned["num_splits"] > 1
    assert attention_config(1, 65, 32, 8, 128, 4096, sm=132, block_m=64)["block_m"] == 64  # the call's own wins
    assert attention_config(1, 65, 32, 8, 128, 4096, sm=132, grouped=True)["min_chunk"] == rule["min_chunk"]
    assert attention_config(1, 65, 32, 8, 64, 4096, sm=132)["min_chunk"] == rule["min_chunk"]  # another head_dim


def test_a_launch_with_a_tile_computes_the_reference(monkeypatch, seed):
    B, T, H, KH, D, ctx = 1, 5, 4, 2, 16, 70
    q = torch.randn(B, T, H, D).to(torch.bfloat16)
    k_cache = torch.randn(B, KH, ctx + T + 8, D).to(torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    lens = torch.tensor([ctx], dtype=torch.int32)
    mask = torch.tril(torch.rand(B, T, T) < 0.5) | torch.eye(T, dtype=torch.bool)
    want = ref.attention_reference(q, k_cache, v_cache, lens, mask)
    monkeypatch.setitem(attention_module.ATTENTION_TILES, (attention_row_band(T * H // KH), D), TILE)
    assert attention_config(B, T, H, KH, D, k_cache.shape[2], q.device)["num_splits"] > 1  # as attention() launches
    got = attention(q, k_cache, v_cache, lens, mask)
    assert (got.float() - want.float()).abs().max() < 2e-2


def test_the_sweep_checks_and_applies_its_winners(tmp_path):
    """A dry run of two tiny cases under the interpreter (its times are meaningless: the winner here is
    whatever ran fastest on this CPU), then --apply on a copy of attention.py."""
    cases = []
    for name, spec in (("tree", (5, 4, 2, 16, 3, True)), ("decode", (1, 4, 2, 16, 0, False))):
        e = attention_tune.run_case(name, spec, time.time() + 300, lambda m: None, dev="cpu", contexts=(40, 70),
                                    layers=1, limit=3)
        for c in e["contexts"].values():
            assert len(c["launches"]) == 3 and all(r["ok"] for r in c["launches"])
            assert c["launches"][0]["fields"] == attention_tune.rule_fields(c["rule"])
        cases.append(e)
    measured = tmp_path / "attention_tune.json"
    # the tree case's second launch made 30 % faster at both contexts; the decode case's launches all slower
    for c in cases[0]["contexts"].values():
        c["launches"][1]["us"] = 0.7 * c["launches"][0]["us"]
        c["launches"][2]["us"] = 2.0 * c["launches"][0]["us"]
    for c in cases[1]["contexts"].values():
        for r in c["launches"][1:]:
            r["us"] = 1.5 * c["launches"][0]["us"]
    measured.write_text(json.dumps({"cases": cases}))
    source = tmp_path / "attention.py"
    shutil.copy(attention_module.__file__, source)
    before = source.read_text()
    assert attention_tune.apply(measured, 0.05, source) == 0
    after = source.read_text()
    outside = lambda text: text.split("ATTENTION_TILES: dict")[0] + text.split("\nATTENTION_FIELDS")[1]  # noqa: E731
    assert outside(after) == outside(before)
    tiles = next(ast.literal_eval(node.value) for node in ast.parse(after).body
                 if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "ATTENTION_TILES")
    second = next(iter(cases[0]["contexts"].values()))["launches"][1]["fields"]
    rule = next(iter(cases[0]["contexts"].values()))["rule"]
    want = {k: (v if v is not None else rule[k]) for k, v in second.items()}
    assert tiles == {**attention_module.ATTENTION_TILES, (attention_row_band(5 * 2), 16): want}
    assert set(want) == attention_module.ATTENTION_FIELDS


def test_a_winner_that_loses_at_one_context_is_not_applied(tmp_path):
    e = attention_tune.run_case("tree", (5, 4, 2, 16, 0, True), time.time() + 300, lambda m: None, dev="cpu",
                                contexts=(40, 70), layers=1, limit=2)
    short, long = e["contexts"].values()
    short["launches"][1]["us"] = 0.5 * short["launches"][0]["us"]
    long["launches"][1]["us"] = 1.1 * long["launches"][0]["us"]   # mean 0.8, but 10 % slower at 70
    assert attention_tune.table_entries([e], 0.05) == {}


@pytest.mark.parametrize("rows", [1, 4, 5, 260])
def test_row_bands_are_powers_of_two_at_least_the_rows(rows):
    band = attention_row_band(rows)
    assert band >= rows and band & (band - 1) == 0 and band < 2 * rows + 1


def _launch(fields, us, min_chunk):
    return {"fields": fields, "us": us, "err": 0.0, "ok": True, "num_splits": 1, "min_chunk": min_chunk}


def test_a_winner_is_written_with_the_chunk_it_ran_and_may_not_lose_anywhere():
    """The rule's min_chunk is rounded to the rule's block_n: a winner that left min_chunk open ran with its own
    rounding, and that is what the table must say. Among candidates, one that loses somewhere is passed over for
    the best one that loses nowhere."""
    rule = {"block_m": 16, "block_n": 64, "num_warps": 4, "min_chunk": 64, "num_splits": 8}
    narrow = {"block_m": 16, "block_n": 32, "num_warps": 4, "min_chunk": None}
    greedy = {"block_m": 16, "block_n": 64, "num_warps": 8, "min_chunk": 128}
    contexts = {}
    for ctx, greedy_us in (("40", 4.0), ("70", 11.0)):   # greedy: mean 0.75 of the rule, 10 % slower at 70
        contexts[ctx] = {"rule": rule, "launches": [_launch(attention_tune.rule_fields(rule), 10.0, 64),
                                                    _launch(narrow, 9.0, 32), _launch(greedy, greedy_us, 128)]}
    entry = {"case": "decode", "T": 1, "heads": 4, "kv_heads": 2, "head_dim": 16, "contexts": contexts}
    assert attention_tune.choose_best(entry)["fields"] == narrow
    assert attention_tune.table_entries([entry], 0.05) == {(2, 16): dict(narrow, min_chunk=32)}
    assert attention_tune.table_entries([entry], 0.2) == {}


def test_with_a_tile_listed_the_sweep_still_times_the_launch_without_it(monkeypatch):
    monkeypatch.setitem(attention_module.ATTENTION_TILES, (attention_row_band(5 * 2), 16), TILE)
    e = attention_tune.run_case("tree", (5, 4, 2, 16, 0, True), time.time() + 300, lambda m: None, dev="cpu",
                                contexts=(40,), layers=1, limit=2)
    launches = next(iter(e["contexts"].values()))["launches"]
    assert launches[0]["fields"] == attention_tune.rule_fields(TILE) and launches[0]["min_chunk"] == 32
    assert launches[1]["fields"] == attention_tune.untiled_fields(5, 4, 2, 16, 4096, "cpu")
    assert launches[1]["min_chunk"] == 64 and launches[1]["fields"]["min_chunk"] == 64
