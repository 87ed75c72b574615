"""TextStream (incremental text, split characters, stop strings held back) and the chat template
(the checkpoint's where it has one, the transcript fallback otherwise)."""
from __future__ import annotations

import json
import shutil

import pytest

from specir.serve.chat_template import ChatTemplate, render_fallback
from specir.serve.protocol import ApiError
from specir.serve.text_stream import TextStream
from specir.zoo.paths import zoo_model_dir as model_dir


@pytest.fixture(scope="module")
def tok():
    from specir.runtime.tokenizer import load_tokenizer
    return load_tokenizer(str(model_dir("code-target")))


def _pieces(tok, ids, stop=(), step=1):
    stream = TextStream(tok, stop)
    out = [stream.push(ids[i:i + step]) for i in range(0, len(ids), step)]
    return out + [stream.finish()], stream


def test_pieces_add_up_to_the_decode(tok):
    text = "def f(x):\n    return 'héllo wörld ✓ 日本'  # ünïcode\n"
    ids = tok(text)["input_ids"]
    for step in (1, 2, 5):
        pieces, _ = _pieces(tok, ids, step=step)
        assert "".join(pieces) == tok.decode(ids, skip_special_tokens=True) == text
        assert not any("\ufffd" in p for p in pieces)  # a split character is held until whole


def test_stop_strings_cut_and_hold_back(tok):
    text = "alpha beta gamma delta"
    ids = tok(text)["input_ids"]
    pieces, stream = _pieces(tok, ids, stop=("gamma",))
    assert "".join(pieces) == "alpha beta " and stream.stopped
    sent = ""
    for p in pieces:
        sent += p
        assert "gam" not in sent  # never sent a prefix of the stop string that then matched
    pieces, stream = _pieces(tok, ids, stop=("gamma!",))  # a prefix that does not complete is sent at the end
    assert "".join(pieces) == text and not stream.stopped
    pieces, _ = _pieces(tok, ids, stop=("zeta", " beta"))
    assert "".join(pieces) == "alpha"


def test_fallback_template(tok):
    chat = ChatTemplate(tok)
    assert chat.source == "transcript"
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render_fallback(messages) == "System: Be brief.\n\nUser: Hi\n\nAssistant:"
    assert chat.encode(messages) == tok(render_fallback(messages))["input_ids"]


def test_checkpoint_template(tmp_path):
    from transformers import AutoTokenizer
    src = model_dir("code-target")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / name, tmp_path / name)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = ("{% for m in messages %}{% if m['role'] == 'system' and not loop.first %}"
                               "{{ raise_exception('system only first') }}{% endif %}"
                               "<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}<assistant>{% endif %}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    chat = ChatTemplate(tok)
    assert chat.source == "checkpoint"
    messages = [{"role": "user", "content": "Hi"}]
    assert chat.render(messages) == "<user>Hi\n<assistant>"
    assert chat.encode(messages) == tok("<user>Hi\n<assistant>", add_special_tokens=False)["input_ids"]
    with pytest.raises(ApiError, match="system only first") as err:
        chat.render(messages + [{"role": "system", "content": "x"}])
    assert err.value.status == 400
