"""Values computed from a file's bytes, cached on disk under the user cache until the file changes.

Contract: `FileCache(name)` keeps `<cache>/<name>.json`: per absolute (resolved) file path, the
file's stamp (size, mtime, ctime, inode, device) and the values stored for it by key.
`get_or_compute(path, key, compute)` returns the stored value while the file's stamp is unchanged,
else `compute()`, which it stores only if the stamp taken before computing still holds after it (a
file rewritten meanwhile is computed again next time, never stored under its new stamp). Values are
JSON. Writes merge into what is on disk under a lock and replace the file atomically, so processes
sharing the cache lose nothing; a process re-reads the file when a lookup misses and the file has
changed since it last read it. Any change to a file's bytes changes its ctime, which `os.utime`
cannot set back. A cache that cannot be read or written is treated as empty (it only costs time).
CACHES names every cache, so a sandbox can seed its own cache folder with them.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from .user_cache import cache_root

CACHES = ("digests", "bf12-stats")
_MISSING = object()  # a stored value may be None


def file_stamp(path: Path) -> list[int]:
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _values(entry, stamp) -> dict | None:
    """The values of an entry written for `stamp` (None: another version of the file, or another format)."""
    if not isinstance(entry, dict) or entry.get("stamp") != stamp or not isinstance(entry.get("values"), dict):
        return None
    return entry["values"]


class FileCache:
    def __init__(self, name: str):
        if name not in CACHES:
            raise ValueError(f"unknown cache {name!r}; list it in file_cache.CACHES")
        self.name = name
        self._entries: dict = {}
        self._seen: tuple | None = None  # (cache path, its stamp) when last read

    @property
    def path(self) -> Path:
        return cache_root() / f"{self.name}.json"

    def _refresh(self) -> None:
        path = self.path
        try:
            seen = (path, tuple(file_stamp(path)))
        except OSError:
            seen = (path, None)
        if seen != self._seen:
            self._entries, self._seen = _read(path), seen

    def _lookup(self, name: str, stamp: list[int], key: str):
        return (_values(self._entries.get(name), stamp) or {}).get(key, _MISSING)

    def get_or_compute(self, path: Path, key: str, compute: Callable):
        path = Path(path).resolve()
        stamp = file_stamp(path)
        value = self._lookup(str(path), stamp, key)
        if value is _MISSING:  # another process may have stored it since this one read the file
            self._refresh()
            value = self._lookup(str(path), stamp, key)
        if value is not _MISSING:
            return value
        value = compute()
        try:
            unchanged = file_stamp(path) == stamp
        except OSError:
            unchanged = False
        if unchanged:
            self._store(str(path), stamp, key, value)
        return value

    def _store(self, name: str, stamp: list[int], key: str, value) -> None:
        cache = self.path
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            with open(cache.parent / f".{self.name}.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                entries = _read(cache)  # what other processes wrote since
                values = _values(entries.get(name), stamp)
                if values is None:
                    values = {}
                    entries[name] = {"stamp": stamp, "values": values}
                values[key] = value
                fd, tmp = tempfile.mkstemp(prefix=f".{self.name}.", dir=cache.parent)
                with os.fdopen(fd, "w") as f:
                    json.dump(entries, f)
                os.replace(tmp, cache)
                self._entries, self._seen = entries, (cache, tuple(file_stamp(cache)))
        except OSError:  # this process still remembers it
            entry = self._entries.get(name)
            if _values(entry, stamp) is None:
                entry = self._entries[name] = {"stamp": stamp, "values": {}}
            entry["values"][key] = value
