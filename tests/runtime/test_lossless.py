"""Chain, tree (static and dynamic) and n-gram pipelines pass `specir check` with zero mismatches on
20 prompts each, at batch sizes 1 and 4 — and they do speculate (tau > 1)."""
from __future__ import annotations

import json

import pytest

from tests.helpers.specs import write_prompts, write_spec

PIPELINES = {
    "chain": dict(k=4),
    "tree_static": dict(k=4, passes="tree-verify{budget=12,topk=3}"),
    "tree_dynamic": dict(k=5, passes="tree-verify{budget=16,topk=3,expand=dynamic,threshold=0.02}"),
    "ngram": dict(k=4),
}


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("kind", sorted(PIPELINES))
def test_pipeline_is_lossless(kind, batch, tmp_path, pair, specir_cli):
    target, drafter = pair
    spec = write_spec(tmp_path, kind, target, "ngram" if kind == "ngram" else drafter, **PIPELINES[kind])
    prompts = write_prompts(tmp_path, 20, 259, seed=batch, repetitive=kind == "ngram")
    code, out, err = specir_cli("check", spec, "--prompts", prompts, "--batch-size", batch,
                                "--max-new-tokens", 24, "--json", "--limit", 0)
    report = json.loads(out)
    assert code == 0, (report["mismatches"], err)
    assert report["prompts"] == 20 and report["tokens_checked"] == 20 * 24
    assert report["mismatches"] == 0
    code, out, err = specir_cli("run", spec, "--prompt-ids", "1,2,3,1,2,3,1,2,3", "--max-new-tokens", 24, "--json")
    assert code == 0, err
    run = json.loads(out)
    assert set(run) >= {"tokens", "text", "accept_lengths", "tokens_per_s"}
    assert sum(run["accept_lengths"]) == len(run["tokens"]) == 24


@pytest.mark.parametrize("kind", ["chain", "tree_static"])
def test_drafted_pipelines_accept_drafts(kind, tmp_path, pair):
    from specir.load import load_pipeline
    from specir.runtime.session import make_engine
    target, drafter = pair
    spec = write_spec(tmp_path, kind, target, drafter, **PIPELINES[kind])
    results = make_engine(load_pipeline(spec), "reference", "cpu", None).generate([[1, 2, 3, 4], [9, 8, 7]], 32)
    assert all(r.tau > 1.8 for r in results), [r.tau for r in results]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_run_warms_up_without_changing_its_output(temperature, tmp_path, pair, specir_cli, monkeypatch):
    """`specir run` decodes a short warm-up of the same prompt first (reported in setup_s, as bench
    warms each batch size) and then the timed call, whose tokens are those of one plain generate."""
    from specir.runtime.session import open_session
    from specir.step.engine import StepEngine
    target, drafter = pair
    spec = write_spec(tmp_path, "chain", target, drafter, k=4)
    calls = []
    generate = StepEngine.generate
    monkeypatch.setattr(StepEngine, "generate", lambda self, prompts, n, **kw: calls.append(n) or generate(
        self, prompts, n, **kw))
    code, out, err = specir_cli("run", spec, "--prompt-ids", "1,2,3,4", "--max-new-tokens", 20, "--json",
                                "--temperature", temperature, "--seed", 5)
    assert code == 0, err
    run = json.loads(out)
    assert calls == [8, 20] and run["setup_s"] > 0
    monkeypatch.setattr(StepEngine, "generate", generate)
    engine = open_session(str(spec)).engine()  # the backend `run` chose
    want = engine.generate([[1, 2, 3, 4]], 20, temperature=temperature, seed=5)[0]
    assert run["tokens"] == want.tokens
