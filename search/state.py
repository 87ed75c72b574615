"""A search's own journal: `<out>/search.sqlite`, one transaction per finished candidate.

Contract: `State(out)` opens it; `meta` holds the search's settings (a resumed search must match
them); `record(rec)` commits one finished candidate; `records()` returns them in order. A kill -9
at any moment loses at most the candidates in flight (SQLite's journal keeps every commit).
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from specir.errors import SpecirError


class State:
    def __init__(self, out: Path):
        self.path = Path(out) / "search.sqlite"
        self.db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                              "CREATE TABLE IF NOT EXISTS candidates (idx INTEGER PRIMARY KEY, record TEXT NOT NULL);")

    def get_meta(self, key: str):
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_meta(self, key: str, value) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def check_settings(self, settings: dict, resume: bool) -> None:
        stored = self.get_meta("settings")
        if stored is None:
            self.set_meta("settings", settings)
            return
        if not resume:
            raise SpecirError(f"{self.path.parent} already holds a search", path=str(self.path.parent),
                              hint="add --resume to continue it, or choose another --out")
        changed = sorted(k for k in settings if stored.get(k) != settings[k] and k not in ("budget", "workers", "ray"))
        if changed:
            raise SpecirError(f"--resume with different settings than the search in {self.path.parent}: "
                              f"{', '.join(changed)}", path=str(self.path.parent),
                              hint="resume with the same spec, target, workload and batch size (only --budget, "
                                   "--workers and --ray may change)")
        self.set_meta("settings", {**stored, **{k: settings[k] for k in ("budget", "workers", "ray")}})

    def record(self, rec: dict) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT OR REPLACE INTO candidates VALUES (?, ?)", (rec["index"], json.dumps(rec)))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def records(self) -> list[dict]:
        return [json.loads(r[0]) for r in self.db.execute("SELECT record FROM candidates ORDER BY idx")]

    def close(self) -> None:
        self.db.close()
