"""Values computed from a file's bytes, cached on disk under the user cache until the file changes.

Contract: `FileCache(name)` keeps `<cache>/<name>.json`: per absolute file path, the file's stamp
(size, mtime, ctime, inode, device) and the values stored for it by key. `get(path, key)` returns
a stored value only while the file's stamp is unchanged (any rewrite of its bytes changes its
ctime, which `os.utime` cannot set back), else None; `put(path, key, value)` stores a JSON value
and writes the cache at once (atomically: a concurrent writer may drop an entry, which only costs
the time to compute it again). A cache that cannot be read or written is treated as empty.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .user_cache import cache_root


def file_stamp(path: Path) -> list[int]:
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


class FileCache:
    def __init__(self, name: str):
        self.name = name
        self._entries: dict | None = None
        self._loaded_from: Path | None = None  # the cache root can change (tests, SPECIR_CACHE)

    @property
    def path(self) -> Path:
        return cache_root() / f"{self.name}.json"

    def _load(self) -> dict:
        if self._entries is None or self._loaded_from != self.path:
            self._loaded_from = self.path
            try:
                data = json.loads(self.path.read_text())
                self._entries = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                self._entries = {}
        return self._entries

    def get(self, path: Path, key: str):
        entry = self._load().get(str(Path(path).resolve()))
        if not isinstance(entry, dict) or entry.get("stamp") != file_stamp(path):
            return None
        return (entry.get("values") or {}).get(key)

    def put(self, path: Path, key: str, value) -> None:
        entries, stamp = self._load(), file_stamp(path)
        name = str(Path(path).resolve())
        entry = entries.get(name)
        if not isinstance(entry, dict) or entry.get("stamp") != stamp:
            entry = entries[name] = {"stamp": stamp, "values": {}}
        entry["values"][key] = value
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.name}.", dir=self.path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(entries, f)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only cache only costs time
