"""bench refuses, before any timing, an --out it cannot write and a batch that cannot fit in memory."""
from __future__ import annotations

import math
import os

import pytest

from specir.load import load_pipeline
from specir.runtime import memory
from tests.harden.conftest import assert_error


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt_ids": [1, 2, 3]}\n')
    return path


@pytest.fixture
def no_timing(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("bench timed before refusing")
    monkeypatch.setattr("specir.cli.cmd_bench.bench", fail)


def test_bench_out_that_cannot_be_written_fails_before_timing(tmp_path, specir_cli, ngram_spec, prompts, no_timing):
    out = tmp_path / "results"
    (out / "bench.json").mkdir(parents=True)
    assert_error(specir_cli("bench", ngram_spec, "--prompts", prompts, "--max-new-tokens", 2, "--out", out),
                 "bench.json there is not a regular file", str(out / "bench.json"), hint="choose another --out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_bench_out_read_only_folder(tmp_path, specir_cli, ngram_spec, prompts, no_timing):
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        assert_error(specir_cli("bench", ngram_spec, "--prompts", prompts, "--out", out),
                     "cannot write into --out folder", hint="choose an --out folder you can write")
    finally:
        out.chmod(0o755)


def test_bench_batch_that_cannot_fit_is_refused_up_front(tmp_path, specir_cli, ngram_spec, prompts, no_timing,
                                                         monkeypatch):
    pipeline = load_pipeline(ngram_spec)
    one = memory.generate_bytes(pipeline, 1, 3, 2)
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1000 * one + memory.weight_bytes(pipeline))
    err = assert_error(specir_cli("bench", ngram_spec, "--prompts", prompts, "--max-new-tokens", 2,
                                  "--batch-size", "1,100000", "--out", tmp_path / "o"),
                       "--batch-size 100000 needs at least", hint="use --batch-size 1000 or less")
    assert "free" in err


def test_memory_estimate_grows_with_the_batch_and_refuses_the_issue_case(monkeypatch):
    """The shipped pair at --batch-size 100000 on a 24 GB machine (issue 11: the OOM killer at 24 GB)."""
    from specir.errors import SpecirError
    from specir.pipeline_template import default_spec_text
    pipeline = load_pipeline("<default>", text=default_spec_text())
    one = memory.generate_bytes(pipeline, 1, 64, 64)
    assert memory.generate_bytes(pipeline, 8, 64, 64) == 8 * one
    monkeypatch.setattr(memory, "available_bytes", lambda device: 24 * 2**30)
    with pytest.raises(SpecirError, match="--batch-size 100000 needs at least"):
        memory.check_batch_fits(pipeline, 100000, 64, 64, "cpu")
    memory.check_batch_fits(pipeline, 8, 64, 64, "cpu")


def test_memory_estimate_of_long_prompts_follows_the_backends_attention():
    """A long prompt's prefill computes no logits on any backend; its attention scores count only
    where the backend materialises them (reference, TVM), not under the Triton flash kernel: the
    Triton estimate grows about linearly with the prompt, the reference one quadratically."""
    from specir.backends_api import attention_scores
    from specir.pipeline_template import default_spec_text
    pipeline = load_pipeline("<default>", text=default_spec_text())
    assert attention_scores("reference") and attention_scores("tvm") and not attention_scores("triton")
    short, long = (memory.generate_bytes(pipeline, 8, n, 64, scores=False) for n in (1024, 8192))
    assert long < 9 * short  # 8x the tokens: caches and activations 8x, no T x S term
    short_s, long_s = (memory.generate_bytes(pipeline, 8, n, 64, scores=True) for n in (1024, 8192))
    assert long_s > 20 * short_s and long_s > long


def test_memory_estimate_of_a_recurrent_model_counts_its_prefill_chunks(tmp_path):
    """A recurrent target prefills in ring-sized chunks: its estimate grows about linearly with the
    prompt (KV rows), not with a prompt-long forward's T x S scores."""
    from specir.pipeline_template import pipeline_text
    from tests.hybrid.checkpoints import make_hybrid_checkpoint
    target = make_hybrid_checkpoint("qwen3_5", tmp_path / "t", seed=1)
    pipeline = load_pipeline("<hybrid>", text=pipeline_text("hybrid", str(target), "ngram", 4))
    short, long = (memory.generate_bytes(pipeline, 8, n, 64, scores=True) for n in (1024, 8192))
    assert long < 12 * short


def test_run_with_more_new_tokens_than_memory_holds(tmp_path, specir_cli, ngram_spec):
    """A context raised by hand (max_position) lets --max-new-tokens pass the context check; the
    caches it would need cannot be allocated: refused up front, not a torch allocation error."""
    path = tmp_path / "long.spec"
    path.write_text(ngram_spec.read_text().replace("max_position = 512", f"max_position = {2**40}"))
    assert_error(specir_cli("run", path, "--prompt-ids", "1,2", "--max-new-tokens", str(2**39)),
                 f"--max-new-tokens {2**39} needs at least", hint="use fewer --max-new-tokens")


def test_weights_to_load_count_against_the_free_memory(monkeypatch):
    """check_batch_fits subtracts what the command loads first: the step's models, and with --check
    the declared target again (the judge's copy); a batch that fits beside them passes, one that
    needs more than is left is refused with the weights named, and no room at all asks for a
    larger device."""
    from specir.errors import SpecirError
    from specir.pipeline_template import default_spec_text
    pipeline = load_pipeline("<default>", text=default_spec_text())
    models = memory.weight_bytes(pipeline)
    target = next(m for m in pipeline.models if m.name == "target")
    expected = sum(2 * math.prod(w.type.shape) for m in pipeline.models for w in m.weights)
    assert models == expected
    assert memory.weight_bytes(pipeline, reference=True) == models + sum(2 * math.prod(w.type.shape)
                                                                         for w in target.weights)
    one = memory.generate_bytes(pipeline, 1, 64, 64)
    monkeypatch.setattr(memory, "available_bytes", lambda device: models + 4 * one)
    memory.check_batch_fits(pipeline, 4, 64, 64, "cpu", resident=models)
    with pytest.raises(SpecirError, match="of it for the weights") as err:
        memory.check_batch_fits(pipeline, 8, 64, 64, "cpu", resident=models)
    assert "--batch-size 4 or less" in err.value.hint
    with pytest.raises(SpecirError, match="of it for the weights") as err:
        memory.check_batch_fits(pipeline, 1, 64, 64, "cpu", resident=models + 4 * one - one // 2)
    assert "more memory" in err.value.hint
    with pytest.raises(SpecirError, match="the weights alone need") as err:
        memory.check_batch_fits(pipeline, 1, 64, 64, "cpu", resident=models + 5 * one)
    assert "more memory" in err.value.hint


def test_a_device_out_of_memory_is_one_error_with_a_hint_not_an_internal_error(monkeypatch, specir_cli):
    import torch

    from specir.cli import main as cli_main

    def oom(args):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 MiB.\nmore detail")
    real = cli_main.build_parser

    def parser():  # every subcommand runs `oom`
        p = real()
        for action in p._subparsers._group_actions:
            for sub in action.choices.values():
                sub.set_defaults(func=oom)
        return p
    monkeypatch.setattr(cli_main, "build_parser", parser)
    code, out, err = specir_cli("targets")
    assert code == 1
    assert "internal error" not in err and "Traceback" not in err
    assert err.startswith("specir: error: the device ran out of memory: CUDA out of memory.")
    assert "more detail" not in err and "hint: ask for less at once" in err
