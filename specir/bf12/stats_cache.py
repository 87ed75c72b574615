"""BF12 statistics of checkpoint matrices, computed once per file version.

Contract: `checkpoint_stats(file, name, read)` returns `analyze(read())` for tensor `name` of the
safetensors `file`, from `<cache>/bf12-stats.json` while the file is unchanged (specir.file_cache),
else computing and storing it. Analysing a matrix reads every weight (about 6 s for an 8B model's
14336 x 4096 MLP matrix on one CPU core); the pack-weights pass runs for every candidate a search
scores and again in its compile, so without this an 8B search spent its time analysing the same
weights (session 15: no second candidate in 500 s).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..file_cache import FileCache
from .stats import MatrixStats, analyze

_CACHE = FileCache("bf12-stats")
VERSION = 1  # of analyze() and the layout it counts; a change stores under a new key


def checkpoint_stats(file: Path, name: str, read: Callable) -> MatrixStats:
    key = f"v{VERSION}:{name}"
    stored = _CACHE.get(file, key)
    if isinstance(stored, dict):
        try:
            return MatrixStats.from_dict(stored)
        except (TypeError, KeyError):
            pass  # a cache written by another version: computed again
    stats = analyze(read())
    _CACHE.put(file, key, stats.as_dict())
    return stats
