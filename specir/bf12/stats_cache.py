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

import torch

from ..file_cache import FileCache
from .stats import MatrixStats, analyze

_CACHE = FileCache("bf12-stats")
# of analyze() and what it counts (the layout's GROUP and WINDOW, the header bytes): bump it when they
# change, so stored statistics of the old layout are not served
VERSION = 1


def checkpoint_stats(file: Path, name: str, read: Callable) -> MatrixStats:
    stored = _CACHE.get_or_compute(file, f"v{VERSION}:{name}", lambda: _analyze_read(read))
    try:
        return MatrixStats.from_dict(stored)
    except (TypeError, KeyError):  # an entry that is not this version's: analysed again, not stored
        return MatrixStats.from_dict(_analyze_read(read))


def _analyze_read(read: Callable) -> dict:
    """analyze() of the read matrix, on the GPU when there is one (an 8B checkpoint: seconds, not the
    ~150 s of two CPU cores; the statistics are integer counts, equal on either device)."""
    w = read()
    if torch.cuda.is_available():
        try:
            return analyze(w.to("cuda")).as_dict()
        except (RuntimeError, torch.cuda.OutOfMemoryError):  # a full or unusable GPU: the CPU gives the same
            pass
        finally:
            torch.cuda.empty_cache()  # the search's workers need the memory, not this process's cache
    return analyze(w).as_dict()
