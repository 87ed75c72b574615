"""Guard stages forked from the warm stage server behave as fresh `python -m MODULE` processes do: their own
session, the requester's working directory and environment, an empty stdin, output relayed line by line,
nothing foreign loaded and nothing left over from the stage before; a timeout kills the stage's whole
process group; a stage whose server dies is killed and reported dead, and a new server takes the next; a busy
server is not evicted for another environment's."""
from __future__ import annotations

import os
import time

import pytest

from specir.guard import stage_server
from specir.guard.process import run_stage

MODULE = "tests.helpers.probe_stage"
FRESH = ["/usr/bin/env"]  # a prefix (as a sandbox launcher is) runs the stage as a fresh process

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the stage server forks")


@pytest.fixture(autouse=True)
def probe_environment(monkeypatch):
    monkeypatch.setenv("SPECIR_PROBE_VARIABLE", "from-the-requester")
    monkeypatch.setattr(stage_server, "FORK_ON_CUDA", True)  # on a GPU machine too (these stages use no CUDA)


def _server():
    return stage_server.server_for(dict(os.environ, PYTHONUNBUFFERED="1"))


def test_a_forked_stage_runs_as_a_fresh_process_would(tmp_path, capsys):
    helper = tmp_path / "helper.py"
    helper.write_text("VALUE = 1\n")
    runs = {}
    for how, prefix in (("fresh", FRESH), ("forked", ()), ("forked again", ())):
        job = {"say": [f"hello from {how}", "second line"], "load": str(helper) if how == "forked" else None}
        runs[how] = run_stage(MODULE, job, timeout=120, prefix=prefix)
        relayed = capsys.readouterr().err
        assert f"hello from {how}\nsecond line\n" in relayed and f"err: hello from {how}\n" in relayed, relayed
    for how, got in runs.items():
        assert got["sid"] == got["pid"], how  # its own session: a timeout kills its group
        assert got["cwd"] == os.getcwd() and got["argv_ok"] and got["stdin_empty"], (how, got)
        assert got["variable"] == "from-the-requester" and got["foreign"] == [], (how, got)
    assert runs["forked"]["saw_loaded"] and not runs["forked again"]["saw_loaded"]  # each fork starts clean
    assert runs["forked"]["pid"] != runs["forked again"]["pid"]
    assert _server().alive()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")  # a zombie has ended
    except FileNotFoundError:
        return True


def test_a_timeout_kills_the_stages_group_and_a_stage_without_a_result_died(tmp_path):
    run_stage(MODULE, {}, timeout=120)  # the server warm, so the timeout below times the stage alone
    pid_file = tmp_path / "grandchild.pid"
    start = time.monotonic()
    got = run_stage(MODULE, {"grandchild": True, "pid_file": str(pid_file), "sleep": 120}, timeout=3)
    assert got == {"timeout": True} and time.monotonic() - start < 60
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(grandchild), "the stage's own child outlived the timeout"
    assert run_stage(MODULE, {"exit": 3}, timeout=120) == {"died": 3}


def test_a_forked_stage_runs_on_the_gpu(monkeypatch):
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU: the stage server must leave CUDA uninitialised for its children")
    monkeypatch.setattr(stage_server, "FORK_ON_CUDA", False)
    assert _server() is None  # with the flag off, stages are fresh processes where CUDA is visible
    monkeypatch.setattr(stage_server, "FORK_ON_CUDA", True)
    assert run_stage(MODULE, {"cuda": True}, timeout=300) == {"cuda_sum": 6.0}
    assert _server() is not None and _server().alive()


def test_a_stage_whose_server_dies_is_killed_and_reported_dead_not_run_again(tmp_path):
    import threading
    server = _server()
    run_stage(MODULE, {}, timeout=120)  # warm
    pid_file = tmp_path / "grandchild.pid"
    got = {}
    worker = threading.Thread(target=lambda: got.update(run_stage(
        MODULE, {"grandchild": True, "pid_file": str(pid_file), "sleep": 120}, timeout=300)))
    worker.start()
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    server.proc.kill()
    worker.join(60)
    assert not worker.is_alive() and got == {"died": -9}, got
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(grandchild)
    got = run_stage(MODULE, {}, timeout=120)  # a new server takes the next stage
    assert got["variable"] == "from-the-requester" and got["foreign"] == []
    assert _server() is not server and _server().alive()


def test_a_busy_server_is_not_evicted_for_another_environment(monkeypatch):
    import threading
    monkeypatch.setattr(stage_server, "MAX_SERVERS", 1)
    busy = _server()
    assert run_stage(MODULE, {}, timeout=120)["variable"] == "from-the-requester"  # ready, then held busy below
    got = {}
    worker = threading.Thread(target=lambda: got.update(run_stage(MODULE, {"sleep": 4}, timeout=120)))
    worker.start()
    time.sleep(1.0)
    monkeypatch.setenv("SPECIR_PROBE_VARIABLE", "another environment")
    assert run_stage(MODULE, {}, timeout=120)["variable"] == "another environment"
    worker.join(120)
    assert got.get("variable") == "from-the-requester" and busy.alive()
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test")  # a volatile variable: the same server
    assert _server() is stage_server.server_for(dict(os.environ, PYTHONUNBUFFERED="1", PYTEST_CURRENT_TEST="x"))
