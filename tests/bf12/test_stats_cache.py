"""BF12 statistics of checkpoint matrices are computed once per file version: the pack-weights
pass then costs a stat per weight (an 8B search spent its time analysing the same weights)."""
from __future__ import annotations

import torch
from safetensors.torch import save_file

from specir.bf12 import analyze
from specir.bf12 import stats_cache
from specir.file_cache import FileCache


def _file(tmp_path, seed=0):
    g = torch.Generator().manual_seed(seed)
    path = tmp_path / "m.safetensors"
    save_file({"w": (torch.randn(64, 256, generator=g) * 0.02).to(torch.bfloat16)}, str(path))
    return path


def _read(path):
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        return f.get_tensor("w")


def test_stats_are_analysed_once_and_equal_a_fresh_analysis(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECIR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(stats_cache, "_CACHE", FileCache("bf12-stats"))
    path, reads = _file(tmp_path), []
    read = lambda: (reads.append(1), _read(path))[1]  # noqa: E731
    first = stats_cache.checkpoint_stats(path, "w", read)
    again = stats_cache.checkpoint_stats(path, "w", read)
    assert first == again == analyze(_read(path))
    assert len(reads) == 1
    # another process (a fresh cache object) reads it from disk
    monkeypatch.setattr(stats_cache, "_CACHE", FileCache("bf12-stats"))
    assert stats_cache.checkpoint_stats(path, "w", read) == first and len(reads) == 1


def test_a_rewritten_file_is_analysed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECIR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(stats_cache, "_CACHE", FileCache("bf12-stats"))
    path = _file(tmp_path, seed=0)
    first = stats_cache.checkpoint_stats(path, "w", lambda: _read(path))
    g = torch.Generator().manual_seed(1)
    save_file({"w": (torch.randn(128, 256, generator=g) * 3.0).to(torch.bfloat16)}, str(path))  # another size
    second = stats_cache.checkpoint_stats(path, "w", lambda: _read(path))
    assert second == analyze(_read(path)) and second != first


def test_an_unreadable_cache_is_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECIR_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "bf12-stats.json").write_text("{not json")
    monkeypatch.setattr(stats_cache, "_CACHE", FileCache("bf12-stats"))
    path = _file(tmp_path)
    assert stats_cache.checkpoint_stats(path, "w", lambda: _read(path)) == analyze(_read(path))
