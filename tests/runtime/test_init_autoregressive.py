"""`specir init --drafter none`: an autoregressive pipeline (no draft op), the baseline a pass such as
pack-weights is measured on alone; it decodes the target's own greedy tokens and `bench` compares it to the stock
target's AR in the same engine."""
from __future__ import annotations

import json

from specir.load import load_pipeline


def test_init_none_writes_a_pipeline_without_a_draft(specir_cli, pair, tmp_path):
    code, out, err = specir_cli("init", "--target-model", pair[0], "--drafter", "none", "--name", "ar")
    assert code == 0, err
    pipeline = load_pipeline("<t>", text=out)
    assert [m.name for m in pipeline.models] == ["target"]
    assert [op.name for op in pipeline.step.ops] == ["verify.chain", "accept.sample", "commit"]
    assert not any(op.name.startswith("draft.") for op in pipeline.step.ops)


def test_ar_pipeline_packed_benches_against_stock_ar(specir_cli, pair, tmp_path):
    code, out, err = specir_cli("init", "--target-model", pair[0], "--drafter", "none")
    assert code == 0, err
    spec = tmp_path / "ar.spec"
    spec.write_text(out)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [5, 6, 7, 8]}\n')
    code, out, err = specir_cli("bench", spec, "-p", "pack-weights{format=bf12}", "--prompts", prompts, "--limit", 0,
                                "--max-new-tokens", 5, "--check", "--json", "--out", tmp_path / "res")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert row["tau"] == 1.0 and row["agree_with_ar"] == 1.0 and row["mismatches"] == 0
    assert row["step_ms"] > 0 and row["ar_step_ms"] > 0
