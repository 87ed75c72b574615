"""The user's specir cache folder: $SPECIR_CACHE, else ~/.cache/specir (compiled kernels,
checkpoint digests, the search memory)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    root = os.environ.get("SPECIR_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "specir"
