"""`specir bench` reports each engine's milliseconds per decode step and the AR step against its byte roofline
(step_roofline.py): the steps the engine ran, each priced at its batch's mean context."""
from __future__ import annotations

import json

import pytest

from specir.cost_model import forward_cost
from specir.load import load_pipeline
from specir.runtime.bench import bench, format_table
from specir.runtime.step_roofline import step_roofline
from specir.targets import get_target
from tests.helpers.specs import write_spec


class _Result:
    def __init__(self, tokens):
        self.tokens, self.accept_lengths = tokens, [1] * len(tokens)


class _Engine:
    """generate(): `new` tokens per prompt over `steps` steps of `step_s` seconds each."""

    def __init__(self, new: int, steps: int, step_s: float):
        self.new, self.steps, self.step_s = new, steps, step_s
        self.timings, self.calls = {}, []

    def session(self, *a, **k):
        return None

    def rows_needed(self, prompt, new):
        return prompt + new

    def generate(self, batch, max_new, **kwargs):
        self.calls.append(len(batch))
        self.timings = {"decode_s": self.steps * self.step_s, "prefill_s": 0.5, "steps": self.steps}
        return [_Result(list(range(self.new))) for _ in batch]


def test_step_times_and_roofline_from_the_steps_run():
    ar, spec = _Engine(new=8, steps=8, step_s=0.010), _Engine(new=8, steps=2, step_s=0.025)
    seen = []

    def roofline(batch, context):
        seen.append((batch, context))
        return 0.004 + 0.0001 * context

    prompts = [[1] * 10, [1] * 20]
    rows = bench(spec, ar, {"w": prompts}, [2], 8, roofline=roofline)
    r = rows[0]
    assert r.ar_step_ms == pytest.approx(10.0) and r.step_ms == pytest.approx(25.0)
    # one timed batch of 2 (warm-ups call generate too, but never ask the roofline): mean context 15 + 8 / 2
    assert seen == [(2, pytest.approx(19.0))]
    assert r.ar_roofline_ms == pytest.approx(1e3 * (0.004 + 0.0019))
    assert r.ar_x_roofline == pytest.approx(10.0 / 5.9)
    assert r.as_dict()["ar_x_roofline"] == pytest.approx(r.ar_x_roofline)
    table = format_table(rows)
    assert "AR x roofline" in table.splitlines()[0] and f"{r.ar_x_roofline:.2f}x" in table


def test_no_roofline_when_a_model_cannot_be_priced():
    ar, spec = _Engine(new=4, steps=4, step_s=0.01), _Engine(new=4, steps=4, step_s=0.01)
    rows = bench(spec, ar, {"w": [[1, 2]]}, [1], 4, roofline=lambda b, c: None)
    assert rows[0].ar_roofline_ms is None and rows[0].ar_x_roofline is None
    assert rows[0].ar_step_ms == pytest.approx(10.0)
    assert "| - |" in format_table(rows)


def test_step_roofline_streams_the_weights_and_the_kv_or_does_the_flops(pair, tmp_path):
    pipeline = load_pipeline(write_spec(tmp_path, "p", pair[0]))
    model = pipeline.models[0]
    cfg = json.loads((pair[0] / "config.json").read_text())
    kv_per_token = (cfg["num_hidden_layers"] * 2 * cfg["num_key_value_heads"]
                    * cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]) * 2)
    seconds = step_roofline(model, get_target("h200"), 2e12, 1e30)
    for batch, context in ((1, 40.4), (4, 7)):
        weights = forward_cost(model, get_target("h200"), tokens=batch, context=0).weight_bytes  # + an embedding row a token
        # each of `batch` requests reads its cache of round(context) rows and the row it writes
        kv = batch * kv_per_token * (round(context) + 1)
        assert seconds(batch, context) == pytest.approx((weights + kv) / 2e12)
    slow_math = step_roofline(model, get_target("h200"), 2e12, 1.0)
    assert slow_math(4, 7) == pytest.approx(forward_cost(model, get_target("h200"), tokens=4, context=7,
                                                         requests=4).flops)


def test_a_real_engine_counts_its_decode_steps(pair, tmp_path):
    from specir.runtime.baseline import ar_pipeline
    from specir.runtime.session import make_engine
    pipeline = load_pipeline(write_spec(tmp_path, "p", pair[0], pair[1], k=3))
    for p in (pipeline, ar_pipeline(pipeline)):
        engine = make_engine(p, "reference", "cpu", None)
        results = engine.generate([[5, 6, 7], [8, 9]], 6)
        assert engine.timings["steps"] == max(len(r.accept_lengths) for r in results) > 0


def test_a_calibration_that_cannot_be_cached_is_still_used(tmp_path, monkeypatch):
    from specir import calibration
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("SPECIR_CACHE", str(blocked / "cache"))   # under a regular file: mkdir fails
    monkeypatch.setattr(calibration, "measure", lambda target: calibration.Calibration(
        target.name, calibration.machine_id(), 123.0, 456.0, 0.0))
    cal = calibration.calibration(get_target("cpu"))
    assert (cal.bandwidth, cal.flops) == (123.0, 456.0)


def test_cli_bench_reports_the_ar_step_against_its_roofline(pair, tmp_path, specir_cli):
    spec = write_spec(tmp_path, "p", pair[0])
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [5, 6, 7, 8]}\n{"prompt_ids": [9, 10]}\n')
    code, out, err = specir_cli("bench", spec, "--prompts", prompts, "--limit", 0, "--max-new-tokens", 6,
                                "--out", tmp_path / "res", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["measured"]["copy_bandwidth_Bps"] > 0 and data["measured"]["matmul_flops"] > 0
    for row in data["rows"]:
        assert row["ar_step_ms"] > 0 and row["step_ms"] > 0
        assert row["ar_roofline_ms"] > 0
        assert row["ar_x_roofline"] == pytest.approx(row["ar_step_ms"] / row["ar_roofline_ms"])
    assert json.loads((tmp_path / "res" / "bench.json").read_text())["rows"][0]["ar_roofline_ms"] > 0
