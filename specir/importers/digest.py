"""The identity of a checkpoint: one sha256 over its config.json and weight files.

Contract: `checkpoint_digest(folder)` returns "sha256:<hex>" over the sorted list of
(file name, sha256 of the file) for config.json, model.safetensors.index.json (if present) and
every *.safetensors file the checkpoint reads. Each file's sha256 is cached in
`<cache>/digests.json` under its absolute path with its size, mtime, ctime, inode and device, so
a second call costs a stat per file; any change to a file's bytes changes its ctime (which
`os.utime` cannot set back), so a stale entry is never reused for rewritten bytes.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from ..errors import SpecirError
from ..user_cache import cache_root

CHUNK = 8 << 20


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _cache_file() -> Path:
    return cache_root() / "digests.json"


def _read_cache() -> dict:
    try:
        data = json.loads(_cache_file().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(entries: dict) -> None:
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".digests.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs time


def checkpoint_files(folder: Path) -> list[Path]:
    files = [folder / "config.json"]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files.append(index)
    files += sorted(folder.glob("*.safetensors"))
    return [f for f in files if f.is_file()]


def checkpoint_digest(folder: str | Path, *, use_cache: bool = True) -> str:
    folder = Path(folder)
    files = checkpoint_files(folder)
    if not files:
        raise SpecirError(f"{folder} holds no checkpoint files", path=str(folder),
                          hint="a Hugging Face folder with config.json and *.safetensors")
    cache = _read_cache() if use_cache else {}
    changed = False
    lines = []
    for f in files:
        key = str(f.resolve())
        try:
            stamp = _stamp(f)
            entry = cache.get(key)
            if entry and entry.get("stamp") == stamp:
                digest = entry["sha256"]
            else:
                digest = _file_sha256(f)
                cache[key] = {"stamp": stamp, "sha256": digest}
                changed = True
        except OSError as exc:
            raise SpecirError(f"cannot read {f}: {exc.strerror}", path=str(f)) from None
        lines.append(f"{f.name}\0{digest}\n")
    if changed and use_cache:
        _write_cache(cache)
    return "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()
