"""The memory and the search journal (SQLite), and what the sandbox enforces on this machine."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specir.search.memory import Memory
from specir.search.sandbox import Limits, probe, run_limited, sandboxed
from specir.search.state import State

DEPLOY = {"target_identity": "sha256:t", "drafter": "zoo:d", "workload": "code", "target": "cpu", "batch_size": 1}
OK = {"ok": True, "tokens_checked": 10, "mismatches": 0}


def mechanism(pipeline, speedup, verdict=OK, source=None):
    return {"pipeline": pipeline, "pipeline_text": "pipeline p {}", "ir_digest": "sha256:" + pipeline,
            "pass_source": source, "speedup": speedup, "tau": 2.0, "tokens_per_s": 100.0, "verdict": verdict}


def test_memory_stores_only_validated_mechanisms_and_finds_the_nearest(tmp_path):
    mem = Memory(tmp_path / "m.sqlite")
    mem.add(DEPLOY, mechanism("draft-shape{k=2}", 1.3))
    mem.add(DEPLOY, mechanism("ngram-draft", 1.5, source="class P: pass\n"))
    mem.add({**DEPLOY, "workload": "prose"}, mechanism("tree-verify", 1.1))
    mem.add({**DEPLOY, "target_identity": "sha256:other"}, mechanism("tree-verify{budget=8}", 2.0))
    with pytest.raises(ValueError):
        mem.add(DEPLOY, mechanism("cheat", 9.0, verdict={"ok": False}))
    assert len(mem.list()) == 4 and all(m["pipeline"] != "cheat" for m in mem.list())
    near = mem.nearest({**DEPLOY, "workload": "new"})
    assert [m["pipeline"] for m in near][:2] == ["ngram-draft", "tree-verify"]  # same target first, best of each
    assert near[-1]["pipeline"] == "tree-verify{budget=8}"
    assert near[0]["pass_hash"].startswith("sha256:") and near[0]["verdict"]["ok"]


def test_memory_cli_lists_shows_and_exports(tmp_path, specir_cli):
    path = tmp_path / "m.sqlite"
    Memory(path).add(DEPLOY, mechanism("draft-shape{k=2}", 1.3))
    code, out, _ = specir_cli("memory", "list", "--memory", path, "--json")
    assert code == 0 and json.loads(out)[0]["pipeline"] == "draft-shape{k=2}"
    code, out, _ = specir_cli("memory", "show", "1", "--memory", path)
    assert code == 0 and "speedup: 1.3" in out
    code, out, _ = specir_cli("memory", "export", "--memory", path)
    assert code == 0 and json.loads(out)[0]["speedup"] == 1.3
    code, _, err = specir_cli("memory", "list", "--memory", tmp_path / "none.sqlite")
    assert code == 2 and "no memory file" in err and "hint:" in err
    (tmp_path / "junk.sqlite").write_text("not a database" * 100)
    code, _, err = specir_cli("memory", "list", "--memory", tmp_path / "junk.sqlite")
    assert code == 2 and "is not a specir memory" in err


WRITER = """
import sys, time
from specir.search.state import State
s = State(sys.argv[1])
i = 0
while True:
    s.record({"index": i, "passes": "x" * 2000, "status": "validated"})
    i += 1
"""


def test_a_kill_9_loses_nothing_that_was_committed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)])
    try:
        state = State(tmp_path) if (tmp_path / "search.sqlite").exists() else None
        for _ in range(600):
            time.sleep(0.05)
            if (tmp_path / "search.sqlite").exists():
                state = state or State(tmp_path)
                if len(state.records()) >= 20:
                    break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    records = State(tmp_path).records()
    assert len(records) >= 20
    assert [r["index"] for r in records] == list(range(len(records)))  # a prefix, each record whole
    assert all(r["passes"] == "x" * 2000 for r in records)


def test_the_sandbox_confines_writes_and_cuts_the_network():
    result = probe()
    assert result["ok"], result
    measured = result["measured"]
    assert measured["write_inside"]
    # what this kernel allows is applied, and what is not is said
    if result["writes_confined"]:
        assert not measured["write_outside"]
    else:
        assert any("NOT confined" in n for n in result["notes"])
    if result["network"] != "open":
        assert measured["socket"] is False
    else:
        assert any("network" in n for n in result["notes"])


def _alive_with(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if stat[stat.rindex(")") + 2] != "Z":
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


def test_the_sandbox_kills_a_loop_and_everything_it_started(tmp_path):
    folder = tmp_path / "box"
    folder.mkdir()
    marker = f"specir-detached-{os.getpid()}-{time.time_ns()}"
    code = ("import subprocess, sys\n"
            f"subprocess.Popen([sys.executable, '-c', 'import os; os.setsid()\\nwhile True: pass', {marker!r}])\n"
            "while True: pass\n")
    start = time.monotonic()
    status, why = run_limited(sandboxed([sys.executable, "-c", code], folder, Limits(wall_seconds=3)),
                              limits=Limits(wall_seconds=3))
    assert status is None and "wall-time limit" in why and time.monotonic() - start < 60
    applied = json.loads((folder / "applied.json").read_text())
    if not applied["pid_namespace"]:
        pytest.skip("no PID namespace here (the report says so): a detached process may outlive the sandbox")
    for _ in range(100):
        if not _alive_with(marker):
            break
        time.sleep(0.1)
    else:
        for pid in _alive_with(marker):
            os.kill(pid, signal.SIGKILL)
        pytest.fail("a process the sandboxed code detached outlived the sandbox")


def test_the_memory_watchdog_kills_a_hog(tmp_path):
    code = "x = bytearray(600 << 20)\nimport time\ntime.sleep(60)\n"
    status, why = run_limited([sys.executable, "-c", code], limits=Limits(wall_seconds=60, memory_bytes=200 << 20))
    assert status is None and "memory limit" in why
