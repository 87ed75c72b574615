"""specir.file_cache: values kept per file version, shared by processes, tolerant of what is on disk
(a digests.json written before the cache had its current format crashed checkpoint_digest)."""
from __future__ import annotations

import json

import pytest

from specir.file_cache import FileCache
from specir.importers.digest import checkpoint_digest


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECIR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting(value):
    calls = []
    return calls, (lambda: (calls.append(1), value)[1])


def test_a_value_is_computed_once_per_file_version(tmp_path, cache_dir):
    f = tmp_path / "w.bin"
    f.write_bytes(b"one")
    calls, compute = _counting(1)
    assert FileCache("digests").get_or_compute(f, "k", compute) == 1
    assert FileCache("digests").get_or_compute(f, "k", compute) == 1  # another process: from disk
    assert len(calls) == 1
    f.write_bytes(b"two, longer")
    calls2, compute2 = _counting(2)
    assert FileCache("digests").get_or_compute(f, "k", compute2) == 2 and len(calls2) == 1


def test_a_file_rewritten_while_computing_is_not_stored(tmp_path, cache_dir):
    f = tmp_path / "w.bin"
    f.write_bytes(b"one")

    def compute():
        f.write_bytes(b"rewritten meanwhile")
        return "from the old bytes"
    assert FileCache("digests").get_or_compute(f, "k", compute) == "from the old bytes"
    calls, again = _counting("fresh")
    assert FileCache("digests").get_or_compute(f, "k", again) == "fresh" and len(calls) == 1


def test_two_processes_writing_keep_both_entries(tmp_path, cache_dir):
    a, b, c, c2 = tmp_path / "a.bin", tmp_path / "b.bin", tmp_path / "c.bin", tmp_path / "c2.bin"
    for f in (a, b, c, c2):
        f.write_bytes(f.name.encode())
    first, second = FileCache("digests"), FileCache("digests")
    second.get_or_compute(c, "k", lambda: "C")  # second has read and written the cache ...
    first.get_or_compute(a, "k", lambda: "A")  # ... before first writes
    # first writes again while second computes, after second's last read: second's write must merge it
    second.get_or_compute(b, "k", lambda: (first.get_or_compute(c2, "k", lambda: "C2"), "B")[1])
    stored = json.loads((cache_dir / "digests.json").read_text())
    assert {str(f.resolve()) for f in (a, b, c, c2)} <= set(stored)


def test_an_old_format_digest_cache_is_read_as_a_miss(tmp_path, cache_dir):
    from tests.helpers.checkpoints import make_checkpoint
    folder = make_checkpoint("llama", tmp_path / "ck", num_hidden_layers=1, hidden_size=16, intermediate_size=32,
                             num_attention_heads=2, num_key_value_heads=1, vocab_size=64)
    expected = checkpoint_digest(folder, use_cache=False)
    from specir.file_cache import file_stamp
    cache_dir.mkdir(parents=True, exist_ok=True)
    old = {str(p.resolve()): {"stamp": file_stamp(p), "sha256": "0" * 64} for p in folder.iterdir()}
    (cache_dir / "digests.json").write_text(json.dumps(old))  # the format before specir.file_cache
    from specir.importers import digest
    digest._CACHE = FileCache("digests")
    assert checkpoint_digest(folder) == expected
    assert checkpoint_digest(folder) == expected


def test_an_unlisted_cache_name_is_refused():
    with pytest.raises(ValueError):
        FileCache("not-listed")
