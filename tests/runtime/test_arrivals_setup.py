"""The arrivals clock keeps first-time setup (captures of a step shape met mid-run) off the busy
time, and reports it apart, as the static bench does."""
from __future__ import annotations

import time
import types

from specir.runtime.arrivals import serve


class _Decode:
    """Two requests of two steps each; the first step of each live count "captures" (0.2 s of setup)."""

    def __init__(self, backend):
        self.backend, self.live, self.seen, self.step_seconds = backend, [], set(), []

    def active(self):
        return sum(1 for r in self.live if not r.done)

    def free_slots(self):
        return 2 - self.active()

    def add_many(self, items):
        added = [types.SimpleNamespace(done=False, left=2, generated=[], accept_lengths=[]) for _ in items]
        self.live += added
        return added

    def step(self):
        live = self.active()
        if live not in self.seen:  # a capture: first-time work, counted in the backend's setup_s
            self.seen.add(live)
            time.sleep(0.2)
            self.backend.setup_s += 0.2
        time.sleep(0.01)
        self.step_seconds.append(0.01)
        for r in self.live:
            if not r.done:
                r.generated.append(1)
                r.accept_lengths.append(1)
                r.left -= 1
                r.done = r.left == 0


def test_captures_are_setup_not_busy_time():
    backend = types.SimpleNamespace(setup_s=0.0)
    engine = types.SimpleNamespace(backend=backend, rows_needed=lambda *a: 8)
    engine.open = lambda *a, **k: _Decode(backend)
    run = serve(engine, [[1], [2]], [0.0, 0.0], 2, 2)
    assert run.tokens == [[1, 1], [1, 1]]
    assert abs(run.setup_s - 0.2) < 1e-9  # one live count met (2), captured once
    assert run.busy_s < 0.15, run.busy_s  # two steps of 0.01 s, not the 0.2 s capture
    assert run.step_seconds == [0.01, 0.01] and abs(run.decode_s - 0.02) < 1e-9 and run.decode_s <= run.busy_s


def test_decode_speedup_leaves_prefill_out():
    """Both runs: 1 s of prefill; AR decodes 100 tokens in 2 s, the pipeline in 0.5 s: 4x decoding,
    2x over busy time (3 s against 1.5 s)."""
    from specir.runtime.arrivals import ArrivalRow
    row = ArrivalRow("w", 0.0, 2, 2, 100, 100 / 3.0, 100 / 1.5, 2.0, 3.0, 2.0, 1.0, 1.0, 1.0,
                     ar_busy_s=3.0, busy_s=1.5, ar_decode_s=2.0, decode_s=0.5)
    assert abs(row.decode_speedup - 4.0) < 1e-9 and abs(row.speedup - 2.0) < 1e-9
    assert row.as_dict()["decode_speedup"] == row.decode_speedup
