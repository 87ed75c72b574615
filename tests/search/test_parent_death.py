"""A search killed at any moment leaves no evaluation behind: its workers and their children end
with the process that started them (specir/parent_death.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")

PARENT = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", {child!r}], start_new_session=True)
    print(child.pid, flush=True)
    time.sleep(600)
""")
CHILD = textwrap.dedent("""
    import time
    from specir.parent_death import die_with_parent
    assert die_with_parent()
    open({ready!r}, "w").close()
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait(predicate, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_a_child_in_its_own_session_dies_with_its_killed_parent(tmp_path):
    ready = tmp_path / "ready"
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(child=CHILD.format(ready=str(ready)))],
                              stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    try:
        assert _wait(ready.exists), "the child never started"
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait(lambda: not _alive(child)), "the child outlived its killed parent"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_the_search_pool_starts_its_workers_with_the_parent_death_signal():
    """A worker of the local pool reports the kernel's parent-death signal (PR_GET_PDEATHSIG)."""
    from specir.search.executors import LocalExecutor
    executor = LocalExecutor(1)
    try:
        assert executor.pool.submit(_pdeathsig).result(timeout=120) == signal.SIGKILL
    finally:
        executor.close()


def _pdeathsig() -> int:
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    value = ctypes.c_int(0)
    libc.prctl(2, ctypes.byref(value), 0, 0, 0)  # PR_GET_PDEATHSIG
    return value.value


def test_a_timing_waiting_for_the_device_lock_says_who_holds_it(tmp_path, capsys):
    """The timing lock names its holder's pid, so a stalled candidate's worker.log says what it waits on."""
    from specir.search.measure import device_lock
    device = f"test{os.getpid()}"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from specir.search.measure import device_lock
        with device_lock({device!r}):
            print("held", flush=True)
            time.sleep(3)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with device_lock(device):
            assert time.monotonic() - start > 2.0  # acquired only once the holder let go
        assert f"held by pid {holder.pid}" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()


def test_a_child_told_of_a_parent_that_is_gone_exits_at_once():
    """A child whose parent is not the one its spawner named (SPECIR_PARENT_PID: it was adopted)
    exits before doing anything; one whose parent is the named one goes on, and the variable is
    not passed on to its own children."""
    code = ("import os; from specir.parent_death import die_with_parent; die_with_parent(); "
            "print(os.environ.get('SPECIR_PARENT_PID'))")
    wrong = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SPECIR_PARENT_PID": "1"},
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 1 and wrong.stdout == ""
    from specir.parent_death import child_environment
    right = subprocess.run([sys.executable, "-c", code], env=child_environment(), capture_output=True, text=True,
                           timeout=120)
    assert right.returncode == 0 and right.stdout.strip() == "None"
