"""The zoo CLI (errors, shapes, install, card) and the shipped pair."""
from __future__ import annotations

import json
import shutil
import tarfile

import pytest
import torch

from specir.cli import cmd_zoo
from specir.errors import SpecirError
from specir.zoo.install import install_models
from specir.zoo.model_card import render
from specir.zoo.paths import MODELS
from tests.zoo.conftest import make_small_model


def test_shapes_and_clear_errors(capsys, tmp_path):
    assert cmd_zoo.main(["shapes"]) == 0
    out = capsys.readouterr().out
    assert "llama-3.1-8b" in out and "8.03B" in out and "llama-3.2-1b" in out
    assert cmd_zoo.main(["inflate", str(tmp_path), "--shape", "llama-9b", "--out", str(tmp_path / "o")]) == 2
    assert "unknown shape 'llama-9b'" in capsys.readouterr().err
    assert cmd_zoo.main(["inflate", str(tmp_path), "--shape", "test-target", "--out", str(tmp_path / "o")]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert cmd_zoo.main(["train", "--corpus", str(tmp_path), "--out", str(tmp_path / "o"), "--steps", "1",
                         "--device", "cpu"]) == 2
    assert "not a zoo corpus" in capsys.readouterr().err
    assert cmd_zoo.main(["workloads", "--corpus", str(tmp_path), "--out", str(tmp_path / "w")]) == 2
    assert "not a zoo corpus" in capsys.readouterr().err
    assert cmd_zoo.main(["agree", str(tmp_path / "nope"), str(tmp_path), "--device", "cpu"]) == 2
    assert "not a model folder" in capsys.readouterr().err


def _fake_trained(folder, tokenizer_json, name, vocab, tied):
    make_small_model(folder / name, tokenizer_json, vocab=vocab, tied=tied)
    log = {"model": name, "parameters": 1000, "architecture": {
        "vocab_size": vocab, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 64, "tie_word_embeddings": tied},
        "settings": {"teacher": "x" if name == "code-drafter" else None}, "tokens_seen": 2e6,
        "epochs": 1.5, "train_loss_last20": 2.5, "heldout_loss": 2.7, "heldout_bits_per_byte": 1.1,
        "wall_s": 90, "device": "cpu", "command": f"specir zoo train ({name})",
        "corpus": {"python": "3.11.7", "train_tokens": 10**6, "heldout_tokens": 10**5, "vocab_size": vocab},
        "evals": [{"step": 0, "heldout_loss": 6.0}, {"step": 10, "heldout_loss": 2.7}]}
    (folder / name / "train_log.json").write_text(json.dumps(log))
    return folder / name


def test_install_and_card(tiny_corpus, tmp_path):
    src = tmp_path / "src"
    target = _fake_trained(src, tiny_corpus / "tokenizer.json", "code-target", 384, False)
    drafter = _fake_trained(src, tiny_corpus / "tokenizer.json", "code-drafter", 384, True)
    with tarfile.open(tmp_path / "code-drafter.tar", "w") as tar:
        tar.add(drafter, arcname="code-drafter")
    models = tmp_path / "models"
    installed = install_models([target, tmp_path / "code-drafter.tar"], models, log=lambda *a: None)
    assert [p.name for p in installed] == ["code-target", "code-drafter"]
    card = render(models)
    assert "| code-target |" in card and "specir zoo train (code-drafter)" in card
    assert "distilled from the target" in card
    (drafter / "tokenizer.json").write_text("{}")
    with pytest.raises(SpecirError, match="different tokenizers"):
        install_models([drafter], models, log=lambda *a: None)
    shutil.copytree(target, tmp_path / "wrong-name")
    with pytest.raises(SpecirError, match="is not one of"):
        install_models([tmp_path / "wrong-name"], models, log=lambda *a: None)


def test_mid_role_sits_between_the_drafter_and_the_target():
    """The mid model (two-level-verify{kind=model}): more parameters and FLOPs than the drafter,
    fewer than the target; the target's head_dim, the drafter's rope and tying (Llama-3.2-3B's)."""
    from specir.zoo.architectures import llama_config, parameter_count
    from specir.zoo.train import MODEL_NAMES

    drafter, mid, target = (llama_config(r, 4096) for r in ("drafter", "mid", "target"))
    sizes = [parameter_count(c) for c in (drafter, mid, target)]
    assert sizes == sorted(sizes) and sizes[1] > 2 * sizes[0] and sizes[1] * 2 < sizes[2]
    assert [c.num_hidden_layers for c in (drafter, mid, target)] == [3, 4, 6]
    assert mid.head_dim == target.head_dim and mid.rope_parameters == drafter.rope_parameters
    assert mid.tie_word_embeddings and MODEL_NAMES["mid"] == "code-mid"


def test_train_mid_choice_distils_from_the_shipped_target(tiny_corpus, tmp_path, capsys):
    """`--model mid` is a CLI choice; its teacher is the target in --out, else the shipped one."""
    assert cmd_zoo._teacher("mid", tmp_path) == str(MODELS / "code-target") or \
        not (MODELS / "code-target" / "config.json").exists()
    (tmp_path / "code-target").mkdir()
    (tmp_path / "code-target" / "config.json").write_text("{}")
    assert cmd_zoo._teacher("mid", tmp_path) == str(tmp_path / "code-target")
    rc = cmd_zoo.main(["train", "--corpus", str(tiny_corpus), "--out", str(tmp_path / "o"), "--model", "mid",
                       "--steps", "1", "--batch-size", "2", "--seq-len", "16", "--eval-windows", "2",
                       "--no-distill", "--device", "cpu"])
    assert rc == 0
    log = json.loads((tmp_path / "o" / "code-mid" / "train_log.json").read_text())
    assert log["role"] == "mid" and log["architecture"]["hidden_size"] == 192
    assert log["settings"]["lr"] == 2.5e-3 and (tmp_path / "o" / "code-mid.tar").is_file()


def test_install_takes_the_mid_model(tiny_corpus, tmp_path):
    src = tmp_path / "src"
    mid = _fake_trained(src, tiny_corpus / "tokenizer.json", "code-mid", 384, True)
    log = json.loads((mid / "train_log.json").read_text())
    log["settings"] = {"teacher": "x", "batch_size": 8, "seq_len": 256}
    log["heldout_loss_512"] = 2.65
    (mid / "train_log.json").write_text(json.dumps(log))
    models = tmp_path / "models"
    assert [p.name for p in install_models([mid], models, log=lambda *a: None)] == ["code-mid"]
    assert (models / "code-mid" / "train_log.json").is_file()
    target = _fake_trained(src, tiny_corpus / "tokenizer.json", "code-target", 384, False)
    drafter = _fake_trained(src, tiny_corpus / "tokenizer.json", "code-drafter", 384, True)
    install_models([target, drafter], models, log=lambda *a: None)
    card = render(models)
    assert "| code-mid |" in card and "llama-3.2-3b" in card and "512-token windows: 2.650" in card
    (mid / "tokenizer.json").write_text("{}")  # the mid model shares the pair's tokenizer
    with pytest.raises(SpecirError, match="different tokenizers"):
        install_models([target, mid], models, log=lambda *a: None)


def test_install_and_card_take_the_hybrid_target(tiny_corpus, tmp_path):
    src, models = tmp_path / "src", tmp_path / "models"
    hybrid = _fake_trained(src, tiny_corpus / "tokenizer.json", "code-hybrid-target", 384, False)
    log = json.loads((hybrid / "train_log.json").read_text())
    log["settings"] = {"teacher": "code-target"}
    (hybrid / "train_log.json").write_text(json.dumps(log))
    pair = [_fake_trained(src, tiny_corpus / "tokenizer.json", n, 384, t) for n, t in
            (("code-target", False), ("code-drafter", True))]
    assert [p.name for p in install_models([hybrid, *pair], models, log=lambda *a: None)][0] == "code-hybrid-target"
    card = render(models)
    assert "| code-hybrid-target |" in card and "distilled from the Llama target" in card
    assert "the hybrid target (code-hybrid-target)" in card.splitlines()[0]


shipped = pytest.mark.skipif(not (MODELS / "code-target" / "train_log.json").exists() or
                             not (MODELS / "code-drafter" / "train_log.json").exists(),
                             reason="the shipped pair is not installed yet")


@shipped
def test_shipped_pair_fits_and_shares_a_tokenizer():
    from specir.zoo import default_pair

    target, drafter = default_pair()
    size = sum(f.stat().st_size for d in (target, drafter) for f in d.iterdir() if f.is_file())
    assert size <= 20_000_000
    assert (target / "tokenizer.json").read_bytes() == (drafter / "tokenizer.json").read_bytes()
    t_log = json.loads((target / "train_log.json").read_text())
    d_log = json.loads((drafter / "train_log.json").read_text())
    assert t_log["heldout_loss"] < d_log["heldout_loss"]  # the target is the stronger model
    assert d_log["parameters"] * 5 <= t_log["parameters"]


@shipped
def test_shipped_pair_loads_in_transformers_and_writes_python():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specir.zoo import default_pair

    for folder in default_pair():
        tok = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
        prompt = "import os\n\n\ndef read_file(path):\n    with open(path) as f:\n        return f."
        ids = tok(prompt, return_tensors="pt")["input_ids"]
        out = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=0)
        text = tok.decode(out[0, ids.shape[1]:])
        assert text.startswith("read"), f"{folder.name}: {text!r}"
        # held-out text is far better predicted than by chance (ln 4096 = 8.3 nats)
        sample = "    def __repr__(self):\n        return '<%s %r>' % (self.__class__.__name__, self.name)\n"
        ids = tok(sample, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            loss = model(input_ids=ids, labels=ids).loss.item()
        limit = 3.0 if folder.name == "code-target" else 3.5
        assert loss < limit, f"{folder.name}: loss {loss:.2f}"


@pytest.mark.skipif(not (MODELS / "code-mid" / "train_log.json").exists(), reason="code-mid is not installed")
def test_shipped_mid_model_sits_between_the_pair_and_shares_its_tokenizer():
    mid = MODELS / "code-mid"
    assert sum(f.stat().st_size for f in mid.iterdir() if f.is_file()) <= 8_000_000
    assert (mid / "tokenizer.json").read_bytes() == (MODELS / "code-target" / "tokenizer.json").read_bytes()
    logs = {n: json.loads((MODELS / n / "train_log.json").read_text()) for n in ("code-drafter", "code-mid", "code-target")}
    assert logs["code-drafter"]["parameters"] < logs["code-mid"]["parameters"] < logs["code-target"]["parameters"]
    assert logs["code-mid"]["role"] == "mid" and logs["code-mid"]["settings"]["teacher"]
