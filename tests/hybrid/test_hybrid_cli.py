"""The issue's done-when, per hybrid family, through the CLI on the CPU: `specir init --target-model
<hybrid> --drafter <llama>` (chain, and tree with tree-verify), then `check` passes with zero
mismatches (chain at batch 1, tree at batch 4; every asked token checked), `run --json` and
`bench --json` work; BF12-packed hybrid targets (pack-weights, then tree-verify) check clean too.

Checkpoints: tests/hybrid/checkpoints.py (each family's unusual config: layer patterns, n_groups,
conv kernels 3 and 4, partial rotary, multipliers) with a 259-entry tokenizer; the drafter is a
random one-layer Llama of that vocabulary (so acceptance is low: the point is the mechanics)."""
from __future__ import annotations

import json

import pytest

from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.helpers.specs import write_prompts
from tests.hybrid.checkpoints import HYBRID_FAMILIES, make_hybrid_checkpoint

VOCAB = 259
TOKENS = 6


@pytest.fixture(scope="module")
def llama_259(tmp_path_factory):
    folder = make_checkpoint("llama", tmp_path_factory.mktemp("llama259") / "d", seed=11, vocab_size=VOCAB,
                             num_hidden_layers=1)
    write_tokenizer(folder, VOCAB)
    return folder


def _target(family, root, **overrides):
    folder = make_hybrid_checkpoint(family, root / family, seed=40, vocab_size=VOCAB, **overrides)
    write_tokenizer(folder, VOCAB)
    return folder


def _init(specir_cli, path, *argv):
    code, out, err = specir_cli("init", *argv)
    assert code == 0, err
    path.write_text(out)
    return path


def _check(specir_cli, spec, prompts, batch):
    code, out, err = specir_cli("check", spec, "--prompts", prompts, "--batch-size", batch, "--max-new-tokens",
                                TOKENS, "--limit", 0, "--json")
    report = json.loads(out)
    assert code == 0, (report.get("mismatches"), err[-2000:])
    assert report["mismatches"] == 0 and report["tokens_checked"] == 4 * TOKENS
    return report


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_init_check_run_per_family(family, llama_259, tmp_path, specir_cli):
    target = _target(family, tmp_path)
    prompts = write_prompts(tmp_path, 4, VOCAB, seed=7)
    chain = _init(specir_cli, tmp_path / "chain.spec", "--target-model", target, "--drafter", llama_259)
    tree = _init(specir_cli, tmp_path / "tree.spec", "--target-model", target, "--drafter", llama_259,
                 "--draft", "tree", "--budget", 8, "--topk", 2)
    assert "verify.tree" in tree.read_text()
    _check(specir_cli, chain, prompts, 1)
    _check(specir_cli, tree, prompts, 4)
    code, out, err = specir_cli("run", tree, "--prompt-ids", "5,6,7", "--max-new-tokens", 4, "--json")
    assert code == 0, err
    assert len(json.loads(out)["tokens"]) == 4


def test_bench_hybrid_tree(llama_259, tmp_path, specir_cli):
    target = _target("falcon_h1", tmp_path)
    tree = _init(specir_cli, tmp_path / "tree.spec", "--target-model", target, "--drafter", llama_259,
                 "--draft", "tree", "--budget", 8, "--topk", 2)
    prompts = write_prompts(tmp_path, 2, VOCAB, seed=3)
    code, out, err = specir_cli("bench", tree, "--prompts", prompts, "--batch-size", "1,2", "--max-new-tokens", 4,
                                "--out", tmp_path / "bench", "--json", "--check")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["batch_size"] for r in rows] == [1, 2]
    assert all(r["mismatches"] == 0 and r["agree_with_ar"] == 1.0 for r in rows), rows


@pytest.mark.parametrize("family", ["qwen3_5", "nemotron_h"])
def test_packed_hybrid_target_checks_clean(family, llama_259, tmp_path, specir_cli):
    """pack-weights packs the hybrid target's projections (BF12, lossless), tree-verify after it."""
    target = _target(family, tmp_path, hidden_size=128)
    prompts = write_prompts(tmp_path, 4, VOCAB, seed=5)
    chain = _init(specir_cli, tmp_path / "chain.spec", "--target-model", target, "--drafter", llama_259)
    code, out, err = specir_cli("opt", chain, "-p", "pack-weights{format=bf12,min_weights=4096},"
                                                   "tree-verify{budget=8,topk=2}")
    assert code == 0, err
    assert "packed_linear" in out and "verify.tree" in out
    packed = tmp_path / "packed.spec"
    packed.write_text(out)
    _check(specir_cli, packed, prompts, 4)
