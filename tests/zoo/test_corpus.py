"""The corpus: fixed split, document rules, tokenized splits that decode back to the text."""
from __future__ import annotations

import json

import numpy as np
import pytest

from specir.errors import SpecirError
from specir.zoo import stdlib_sources
from specir.zoo.corpus import load_meta, load_tokens
from specir.zoo.tokenizer import EOS_ID, load_tokenizer


def test_split_is_a_fixed_function_of_the_name():
    # Pinned values: changing the split rule silently would move files between the splits.
    assert stdlib_sources.split_of("argparse.py", "code") == stdlib_sources.split_of("argparse.py", "code")
    names = [f"mod{i}.py" for i in range(2000)]
    held = sum(stdlib_sources.split_of(n, "code") == "heldout" for n in names)
    assert 60 <= held <= 140  # about 5%
    prose = sum(stdlib_sources.split_of(n, "prose") == "heldout" for n in names)
    assert 320 <= prose <= 480  # about 20%


def test_shipped_file_list_matches_the_rules():
    lines = [l for l in stdlib_sources.FILE_LIST.read_text().splitlines() if l and not l.startswith("#")]
    assert len(lines) > 1000
    for line in lines:
        name, kind, split = line.split("\t")
        assert split == stdlib_sources.split_of(name, kind)
    names = {l.split("\t")[0] for l in lines}
    assert "argparse.py" in names and "pydoc_data/topics.py:assert" in names
    assert not any(n.startswith("site-packages/") for n in names)


def test_scan_rules_on_a_fake_stdlib(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "good.py").write_text("def f():\n    return 1\n")
    (tmp_path / "pkg" / "latin1.py").write_bytes(b"# caf\xe9\nx = 1\n")  # not UTF-8: dropped
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "other.py").write_text("x = 1\n")
    (tmp_path / "pydoc_data").mkdir()
    (tmp_path / "pydoc_data" / "topics.py").write_text("topics = {'a': 'Alpha text.', 'b': 'Beta.'}\n")
    (tmp_path / "README.txt").write_text("Some prose.\n")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "data.txt").write_text("1 2 3\n")  # data under tests: not prose
    docs = stdlib_sources.scan_documents(tmp_path)
    assert [(d.name, d.kind) for d in docs] == [
        ("README.txt", "prose"), ("pkg/good.py", "code"),
        ("pydoc_data/topics.py:a", "prose"), ("pydoc_data/topics.py:b", "prose")]
    found, missing = stdlib_sources.list_documents(["pkg/good.py", "pkg/latin1.py"], tmp_path)
    assert [d.name for d in found] == ["pkg/good.py"] and missing == ["pkg/latin1.py"]


def test_corpus_tokens_decode_to_the_documents(tiny_corpus):
    meta = load_meta(tiny_corpus)
    assert meta["vocab_size"] == 384
    tok = load_tokenizer(tiny_corpus / "tokenizer.json")
    index = json.loads((tiny_corpus / "heldout" / "index.json").read_text())
    held = load_tokens(tiny_corpus, "heldout")
    assert held.dtype == np.uint16 and held[-1] == EOS_ID
    docs = np.split(np.asarray(held), np.nonzero(np.asarray(held) == EOS_ID)[0] + 1)[:-1]
    assert len(docs) == len(index)
    first = (tiny_corpus / "heldout" / index[0]["file"]).read_text()
    assert tok.decode(docs[0][:-1].tolist()) == first


def test_missing_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(SpecirError, match="not a zoo corpus"):
        load_meta(tmp_path)
