"""The memory of validated mechanisms: a transactional SQLite file shared by every search.

Contract: `Memory(path)` opens (creating) the file; `add(deployment, mechanism)` stores one
validated mechanism in one transaction; `nearest(deployment, limit)` returns the best mechanisms
of the deployments closest to `deployment` (same declared target identity weighs most, then the
drafter, the hardware target, the workload and the batch size); `list()`, `get(id)`. A
deployment is {target_identity, drafter, workload, target, batch_size}. A mechanism: the pass
pipeline string, the final IR's text and digest, the pass source and its sha256 (agent-written
passes), measured speedup, tau, tokens/s, the guard's verdict and the date. Only what passed the
guard and its timed-output forcing is ever added (the search's rule; `add` refuses a verdict
that is not ok).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import sqlite3
from pathlib import Path

from specir.errors import SpecirError
from specir.user_cache import cache_root

SCHEMA = """
CREATE TABLE IF NOT EXISTS mechanisms (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  target_identity TEXT NOT NULL, drafter TEXT NOT NULL, workload TEXT NOT NULL, target TEXT NOT NULL,
  batch_size INTEGER NOT NULL,
  pipeline TEXT NOT NULL, pipeline_text TEXT NOT NULL, ir_digest TEXT NOT NULL,
  pass_source TEXT, pass_hash TEXT,
  speedup REAL NOT NULL, tau REAL NOT NULL, tokens_per_s REAL NOT NULL,
  verdict TEXT NOT NULL, date TEXT NOT NULL, search TEXT,
  UNIQUE (target_identity, drafter, workload, target, batch_size, ir_digest)
);
"""
KEYS = ("target_identity", "drafter", "workload", "target", "batch_size")


def default_path() -> Path:
    return cache_root() / "search" / "memory.sqlite"


def source_hash(source: str | None) -> str | None:
    return "sha256:" + hashlib.sha256(source.encode()).hexdigest() if source else None


def distance(a: dict, b: dict) -> float:
    d = 0.0
    d += 0 if a["target_identity"] == b["target_identity"] else 8
    d += 0 if a["drafter"] == b["drafter"] else 4
    d += 0 if a["target"] == b["target"] else 2
    d += 0 if a["workload"] == b["workload"] else 1
    d += abs(math.log2(max(int(a["batch_size"]), 1)) - math.log2(max(int(b["batch_size"]), 1))) / 2
    return d


class Memory:
    def __init__(self, path: str | Path | None = None, *, create: bool = True):
        self.path = Path(path) if path else default_path()
        if not create and not self.path.is_file():
            raise SpecirError(f"no memory file {self.path}", path=str(self.path),
                              hint="run specir search first, or give --memory FILE")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise SpecirError(f"{self.path} is not a specir memory ({exc})", path=str(self.path),
                              hint="give --memory a new file name, or a file written by specir search") from None
        self.db.row_factory = sqlite3.Row

    def close(self) -> None:
        self.db.close()

    def add(self, deployment: dict, mechanism: dict) -> int | None:
        verdict = mechanism["verdict"]
        if not (verdict and verdict.get("ok")):
            raise ValueError("only mechanisms that passed the guard are stored")
        row = {**{k: deployment[k] for k in KEYS}, "pipeline": mechanism["pipeline"],
               "pipeline_text": mechanism["pipeline_text"], "ir_digest": mechanism["ir_digest"],
               "pass_source": mechanism.get("pass_source"), "pass_hash": source_hash(mechanism.get("pass_source")),
               "speedup": mechanism["speedup"], "tau": mechanism["tau"], "tokens_per_s": mechanism["tokens_per_s"],
               "verdict": json.dumps(verdict), "search": mechanism.get("search"),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            cur = self.db.execute(f"INSERT OR REPLACE INTO mechanisms ({cols}) VALUES ({marks})", list(row.values()))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return cur.lastrowid

    def list(self) -> list[dict]:
        return [self._row(r) for r in self.db.execute("SELECT * FROM mechanisms ORDER BY id")]

    def get(self, ident: int) -> dict:
        row = self.db.execute("SELECT * FROM mechanisms WHERE id = ?", (ident,)).fetchone()
        if row is None:
            raise SpecirError(f"no mechanism {ident} in {self.path}", hint="specir memory list shows the ids")
        return self._row(row)

    def nearest(self, deployment: dict, limit: int = 5) -> list[dict]:
        """The best mechanism of each stored deployment, closest deployments first."""
        best: dict[tuple, dict] = {}
        for m in self.list():
            key = tuple(m[k] for k in KEYS)
            if key not in best or m["speedup"] > best[key]["speedup"]:
                best[key] = m
        ranked = sorted(best.values(), key=lambda m: (distance(deployment, m), -m["speedup"]))
        return ranked[:limit]

    @staticmethod
    def _row(row) -> dict:
        d = dict(row)
        d["verdict"] = json.loads(d["verdict"])
        return d
