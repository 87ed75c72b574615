"""A wall-clock limit on code specir does not control: importing a plugin and running a pass.

    with time_limit(seconds, "pass my-pass"):
        result = p.run(pipeline)

raises `TimeLimitExceeded` (a BaseException, so a plugin's `except Exception` cannot swallow it)
when the block runs longer than `seconds`. It uses SIGALRM (setitimer), so it works in the main
thread of a POSIX process and is a no-op elsewhere (another thread, Windows) or with `seconds`
None or 0. The limit for passes and plugin imports is `pass_timeout()`: PASS_TIMEOUT_S unless
the command line (`--pass-timeout`) set another one. The limit never changes a result; it only
stops a run that would never end.
"""
from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager

PASS_TIMEOUT_S = 300.0  # default: far above what any built-in pass takes on an 8B-parameter IR

_timeout = PASS_TIMEOUT_S


class TimeLimitExceeded(BaseException):
    def __init__(self, what: str, seconds: float):
        super().__init__(f"{what} ran longer than {seconds:g} s")
        self.what, self.seconds = what, seconds


def set_pass_timeout(seconds: float | None) -> None:
    """The limit for plugin imports and pass runs in this process (None or 0: none)."""
    global _timeout
    _timeout = seconds or None


def pass_timeout() -> float | None:
    return _timeout


@contextmanager
def time_limit(seconds: float | None, what: str):
    usable = (seconds and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise TimeLimitExceeded(what, seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    outer = signal.setitimer(signal.ITIMER_REAL, seconds)  # returns the timer it replaces
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer[0]:  # an enclosing timer keeps running, less the time spent here
            signal.setitimer(signal.ITIMER_REAL, max(outer[0] - (time.monotonic() - start), 0.001), outer[1])
