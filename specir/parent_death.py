"""Child processes that end with the process that started them.

`die_with_parent()` asks the kernel (Linux prctl PR_SET_PDEATHSIG) to SIGKILL the calling process
when its parent ends, and exits at once when the parent has already gone. The search's workers,
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


def die_with_parent() -> bool:
    """True when the kernel will end this process with its parent (False: not on this system)."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent or parent == 1:  # the parent ended before the request took hold
        os._exit(1)
    return True
