"""specir/token_ranking.py: ids ranked by their count in a corpus tokenised with the checkpoint's
tokenizer (most first, ties and unseen ids by id), from a text file, JSONL rows or a folder; bad
corpora are one error."""
from __future__ import annotations

from collections import Counter

import pytest

from specir.errors import SpecirError
from specir.runtime.tokenizer import load_tokenizer
from specir.token_ranking import ranked_ids
from tests.helpers.checkpoints import write_tokenizer

V = 300
TEXT = "for i in range(10):\n    print(i)\n" * 4 + "while x:\n    pass\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    write_tokenizer(path, V)
    return path


def by_hand(folder, *texts):
    counts = Counter(t for text in texts for t in load_tokenizer(str(folder))(text, add_special_tokens=False)["input_ids"])
    return tuple(sorted(range(V), key=lambda t: (-counts.get(t, 0), t)))


def test_a_text_file_ranks_by_count_then_id(folder, tmp_path):
    (tmp_path / "c.txt").write_text(TEXT)
    got = ranked_ids(str(folder), V, str(tmp_path / "c.txt"))
    assert got == by_hand(folder, TEXT) and sorted(got) == list(range(V))
    assert got[:3] != (0, 1, 2)  # the corpus's tokens lead, not the low ids


def test_jsonl_rows_and_folders_read_their_text(folder, tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"text": "for i in range(3):"}\n\n{"prompt": "while x:", "completion": " pass"}\n')
    assert ranked_ids(str(folder), V, str(rows)) == by_hand(folder, "for i in range(3):", "while x: pass")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text(TEXT)
    (tmp_path / "docs" / "b.bin").write_bytes(b"\x00\x01")  # not text: not read
    assert ranked_ids(str(folder), V, str(tmp_path / "docs")) == by_hand(folder, TEXT)


def test_bad_corpora_are_one_error(folder, tmp_path):
    with pytest.raises(SpecirError, match="does not exist"):
        ranked_ids(str(folder), V, str(tmp_path / "missing.txt"))
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(SpecirError, match="line 1 of the ranking corpus is not JSON"):
        ranked_ids(str(folder), V, str(tmp_path / "bad.jsonl"))
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(SpecirError, match="gave no tokens"):
        ranked_ids(str(folder), V, str(tmp_path / "empty.txt"))


def test_a_long_corpus_is_sampled_from_every_text(folder, tmp_path, monkeypatch):
    import specir.token_ranking as ranking
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("for " * 50)
    (tmp_path / "docs" / "b.txt").write_text("while " * 50)
    monkeypatch.setattr(ranking, "CORPUS_CHARS", 250)  # half of the 500 characters: each text's first half
    ranking._ranked.cache_clear()
    got = ranking.ranked_ids(str(folder), V, str(tmp_path / "docs"))
    assert got == by_hand(folder, "for " * 25, "while " * 25)  # the second text counts too
