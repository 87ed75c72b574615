"""Child processes that end with the process that started them.

`die_with_parent()` asks the kernel (Linux prctl PR_SET_PDEATHSIG) to SIGKILL the calling process
when its parent ends, and exits at once when the parent it was told of has already gone. The search's workers,
the guard's child, timers and sandboxed stages call it first thing: a search killed at any moment
(a `timeout`, a kill -9, a closed terminal) leaves no evaluation running on that holds a GPU,
its memory or the device's timing lock. A no-op where prctl is not available.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal

PR_SET_PDEATHSIG = 1
PARENT_VARIABLE = "SPECIR_PARENT_PID"


def die_with_parent(parent: int | None = None) -> bool:
    """True when the kernel will end this process with its parent (False: not on this system).
    `parent`: the pid of the process that started this one (default: the SPECIR_PARENT_PID a
    spawner set with `child_environment`, read once and not passed on); when the process's
    parent is no longer that one (it ended before the request took hold), exit at once."""
    expected = parent or int(os.environ.pop(PARENT_VARIABLE, "0") or 0) or None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if expected is not None and os.getppid() != expected:  # adopted: the parent is gone already
        os._exit(1)
    return True


def child_environment(env: dict | None = None) -> dict:
    """`env` (default this process's) with SPECIR_PARENT_PID set to this process, for a child that
    calls die_with_parent()."""
    return {**(os.environ if env is None else env), PARENT_VARIABLE: str(os.getpid())}
