"""A dependency-free progress bar for long zoo jobs (training, inflation, agreement).

On a terminal it redraws one line; otherwise (logs, CI) it prints a line at most every
`every_s` seconds and at the end, so that captured output stays short.
"""
from __future__ import annotations

import sys
import time


class Progress:
    """`Progress(total, label)`; call `update(n, note)` as work is done and `close()` at the end."""

    def __init__(self, total: float, label: str, *, every_s: float = 10.0, stream=None,
                 unit: str = ""):
        self.total = max(total, 1e-9)
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.done = 0.0
        self.start = time.perf_counter()
        self._last_print = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._final_printed = False

    def update(self, n: float = 1, note: str = "") -> None:
        self.done += n
        now = time.perf_counter()
        if self._tty or now - self._last_print >= self.every_s or self.done >= self.total:
            self._print(note, final=False)
            self._last_print = now
            self._final_printed = not self._tty and self.done >= self.total

    def _print(self, note: str, final: bool) -> None:
        elapsed = time.perf_counter() - self.start
        frac = min(self.done / self.total, 1.0)
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        bar = "#" * int(frac * 24)
        line = (f"{self.label} [{bar:<24}] {frac * 100:5.1f}% "
                f"{self.done:,.0f}/{self.total:,.0f}{self.unit} {elapsed:6.1f}s eta {eta:6.1f}s"
                + (f"  {note}" if note else ""))
        if self._tty and not final:
            self.stream.write("\r" + line[:200])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self, note: str = "") -> None:
        if self._final_printed:
            return
        if self._tty:
            self.stream.write("\r")
        self._print(note, final=True)
