"""Training: the loss falls, a resumed run continues the same curve, the output loads."""
from __future__ import annotations

import json

import pytest
import torch

from specir.errors import SpecirError
from specir.zoo.train import TrainSettings, batch_at, lr_at, train

QUIET = dict(log=lambda *a: None)


def settings(**kw):
    base = dict(role="tiny", seq_len=32, batch_size=8, lr=1e-2, warmup_steps=3, evals=2,
                eval_windows=8, max_epochs=1000)
    base.update(kw)
    return TrainSettings(**base)


def test_a_few_steps_lower_the_loss(tiny_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stderr", open("/dev/null", "w"))
    log = train(tiny_corpus, tmp_path, settings(steps=24), **QUIET)
    history = json.loads((tmp_path / "tiny" / "train_log.json").read_text())
    assert history["steps"] == 24 and history["tokens_seen"] == 24 * 8 * 32
    assert history["heldout_loss_512"] > 0  # 32-token windows: also the loss on the pair's 512-token ones
    evals = [e["heldout_loss"] for e in log["evals"]]
    assert evals[0] > 5.5 and log["evals"][0]["step"] == 0  # before training: about ln(384)
    assert evals[-1] < evals[0] - 0.7  # held-out loss falls


def test_resumed_run_continues_the_same_curve(tiny_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stderr", open("/dev/null", "w"))
    straight = train(tiny_corpus, tmp_path / "a", settings(steps=6), **QUIET)
    state = train(tiny_corpus, tmp_path / "b", settings(steps=6), stop_after=3, **QUIET)
    assert state["step"] == 3 and not (tmp_path / "b" / "tiny").exists()
    resumed = train(tiny_corpus, tmp_path / "b", settings(steps=6), resume=True, **QUIET)
    a = [h["heldout_loss"] for h in json.load(open(tmp_path / "a/tiny/train_log.json"))["evals"]]
    b = [h["heldout_loss"] for h in json.load(open(tmp_path / "b/tiny/train_log.json"))["evals"]]
    assert a == pytest.approx(b, abs=1e-4) and len(a) == 3
    sa = torch.load(tmp_path / "a/checkpoints/tiny.pt", weights_only=False)
    sb = torch.load(tmp_path / "b/checkpoints/tiny.pt", weights_only=False)
    curve_a = [h["train_loss"] for h in sa["state"]["history"][1:]]
    curve_b = [h["train_loss"] for h in sb["state"]["history"][1:]]
    assert len(curve_a) == 6
    assert curve_a == pytest.approx(curve_b, abs=1e-4)
    for k in sa["model"]:
        torch.testing.assert_close(sa["model"][k], sb["model"][k], atol=1e-5, rtol=1e-4)
    assert resumed["steps"] == straight["steps"] == 6


def test_existing_checkpoint_needs_resume_or_fresh(tiny_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stderr", open("/dev/null", "w"))
    train(tiny_corpus, tmp_path, settings(steps=2), **QUIET)
    with pytest.raises(SpecirError, match="already exists"):
        train(tiny_corpus, tmp_path, settings(steps=2), **QUIET)
    with pytest.raises(SpecirError, match="other settings"):
        train(tiny_corpus, tmp_path, settings(steps=4, lr=5e-3), resume=True, **QUIET)


def test_output_loads_in_transformers_and_distils(tiny_corpus, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setattr("sys.stderr", open("/dev/null", "w"))
    train(tiny_corpus, tmp_path, settings(steps=3), **QUIET)
    folder = tmp_path / "tiny"
    model = AutoModelForCausalLM.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    assert next(model.parameters()).dtype == torch.bfloat16
    ids = tok("def f(x):\n    return", return_tensors="pt")["input_ids"]
    assert tok.decode(ids[0]) == "def f(x):\n    return"
    assert model.generate(ids, max_new_tokens=4, do_sample=False).shape[1] == ids.shape[1] + 4
    assert (tmp_path / "tiny.tar").stat().st_size > 0
    # a student distilled from it (a differently seeded tiny model) trains too
    student = settings(steps=2, teacher=str(folder), seed=1)
    log = train(tiny_corpus, tmp_path / "student", student, **QUIET)
    assert log["settings"]["teacher"] == str(folder)


def test_schedule_and_batches_are_deterministic(tiny_corpus):
    import numpy as np
    from specir.zoo.corpus import load_tokens

    s = settings(steps=100)
    assert lr_at(0, 100, s) == pytest.approx(s.lr / 3)
    assert lr_at(99, 100, s) == pytest.approx(s.lr * s.min_lr_ratio, rel=0.05)
    tokens = load_tokens(tiny_corpus, "train")
    assert torch.equal(batch_at(tokens, 7, s), batch_at(tokens, 7, s))
    assert not torch.equal(batch_at(tokens, 7, s), batch_at(tokens, 8, s))


def test_timed_run_fixes_its_length_and_resumes(tiny_corpus, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stderr", open("/dev/null", "w"))
    timed = settings(minutes=0.01, max_epochs=1000)  # the step count is set after step 20
    state = train(tiny_corpus, tmp_path, timed, stop_after=8, **QUIET)
    assert state["total_steps"] is None
    log = train(tiny_corpus, tmp_path, timed, resume=True, **QUIET)
    assert log["steps"] >= 21  # calibrated after the resume, at least one step past it
