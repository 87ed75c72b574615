"""Loading user plugins: the pass time limit, then each `--plugin` file.

Contract: `load_plugins(paths, timeout_s)` sets the limit for plugin imports and passes
(`timeout_s` seconds >= 0, 0 = none; anything else is a SpecirError with a hint) and imports
every file through `pass_infra.load_plugin` (located errors for broken plugins).
"""
from __future__ import annotations

import math

from .errors import SpecirError
from .pass_infra import load_plugin
from .time_limit import PASS_TIMEOUT_S, set_pass_timeout


def load_plugins(paths, timeout_s: float | None = PASS_TIMEOUT_S) -> None:
    if timeout_s is None or not math.isfinite(timeout_s) or timeout_s < 0:
        raise SpecirError(f"--pass-timeout must be a number of seconds >= 0, got {timeout_s}",
                          hint=f"e.g. --pass-timeout {PASS_TIMEOUT_S:g} (0 = no limit)")
    set_pass_timeout(timeout_s)
    for path in paths or []:
        load_plugin(path)
