"""Workloads: four shipped sets of held-out prompts, the schema, and user prompt files."""
from __future__ import annotations

import json

import pytest

from specir.errors import SpecirError
from specir.zoo import workloads
from specir.zoo.stdlib_sources import split_of


def test_four_shipped_workloads_of_held_out_prompts():
    assert workloads.names() == ["code-completion", "docstrings", "refactor", "prose"]
    for name in workloads.names():
        records = workloads.load(name)
        assert len(records) >= 40
        assert len({r["id"] for r in records}) == len(records)
        for r in records:
            assert set(r) == set(workloads.SCHEMA) and r["workload"] == name
            kind = "prose" if r["source"].startswith("pydoc_data/topics.py:") or \
                r["source"].endswith((".txt", ".rst", ".html")) else "code"
            assert split_of(r["source"], kind) == "heldout", r["source"]
            assert 0 < r["max_new_tokens"] <= 192 and r["prompt"].strip()


def test_prompts_fit_the_context():
    from specir.zoo.tokenizer import load_tokenizer
    from specir.zoo.paths import MODELS

    path = MODELS / "code-target" / "tokenizer.json"
    if not path.exists():
        pytest.skip("the shipped pair is not installed yet")
    tok = load_tokenizer(path)
    for name in workloads.names():
        for r in workloads.load(name):
            n = len(tok.encode(r["prompt"], add_special_tokens=False).ids)
            assert n <= 384 and n + r["max_new_tokens"] <= 512, r["id"]


def test_refactor_prompts_are_repetition_heavy():
    for r in workloads.load("refactor"):
        original, _, rest = r["prompt"].partition("# Refactored: ")
        assert original.startswith("# Original version:\ndef ") or \
            original.startswith("# Original version:\nasync def ")
        assert "renamed to" in rest


def test_unknown_workload():
    with pytest.raises(SpecirError, match="unknown workload"):
        workloads.load("nope")


def test_user_prompt_files(tmp_path):
    good = tmp_path / "p.jsonl"
    good.write_text('{"prompt": "def f():", "other": 1}\n\n{"prompt_ids": [1, 2, 3], "max_new_tokens": 5}\n')
    records = workloads.load_prompts_file(good)
    assert records == [{"id": "p.jsonl:1", "prompt": "def f():"},
                       {"id": "p.jsonl:3", "prompt_ids": [1, 2, 3], "max_new_tokens": 5}]
    cases = {'{"prompt": "a"}\n{"prompt": \n': "p.jsonl:2",
             '{"text": "a"}\n': "neither 'prompt' nor 'prompt_ids'",
             '{"prompt_ids": [1, -2]}\n': "prompt_ids",
             '[1, 2]\n': "JSON object",
             '{"prompt": "a", "max_new_tokens": 0}\n': "max_new_tokens"}
    for text, expected in cases.items():
        good.write_text(text)
        with pytest.raises(SpecirError) as err:
            workloads.load_prompts_file(good)
        assert expected in err.value.format()
    assert "p.jsonl:1" in str(pytest.raises(SpecirError, workloads.load_prompts_file,
                                            _write(tmp_path, '{"text": 1}\n')).value.format())


def _write(tmp_path, text):
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    return path
