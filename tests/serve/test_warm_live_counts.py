"""The serving lanes' warm-up: on a backend that captures, every prefill shape captured while no
slot is taken, then two steps at every live count 1 .. capacity before the first request (a step
shape runs eagerly first, is captured the second time), then every slot free again; elsewhere
one short request."""
from __future__ import annotations

import types

from specir.serve.scheduler import Lane


class _Decode:
    def __init__(self, max_seq):
        self.requests, self.steps, self.prepared = [], [], []  # prepared: live requests at each prepare_prefills
        self.session = types.SimpleNamespace(max_seq=max_seq,
                                             prepare_prefills=lambda: self.prepared.append(len(self.requests)) or 5)

    def add(self, prompt, max_new, temperature, seed):
        r = types.SimpleNamespace(done=False, left=max_new, seed=seed)
        self.requests.append(r)
        return r

    def step(self):
        live = [r for r in self.requests if not r.done]
        self.steps.append(len(live))
        for r in live:
            r.left -= 1
            r.done = r.left <= 0

    def cancel(self, r):
        r.done = True

    def forget_finished(self):
        self.requests = [r for r in self.requests if not r.done]


def _lane(captures, capacity, max_seq=256):
    decode = _Decode(max_seq)
    engine = types.SimpleNamespace(backend=types.SimpleNamespace(captures=captures), max_position=4096,
                                   rows_needed=lambda prompt, max_new: prompt + max_new + 13,
                                   open=lambda *a, **k: decode)
    lane = Lane(engine, capacity, max_seq, sampling=False)
    lane.open()
    return lane, decode


def test_a_capturing_backend_meets_every_live_count_before_serving():
    lane, decode = _lane(True, 8)
    lane.warm()
    assert decode.steps == [n for n in range(1, 9) for _ in (0, 1)]
    assert decode.requests == []  # every warm-up request left its slot
    assert decode.prepared == [0] and lane.prefill_shapes == 5  # prefill shapes captured first, slots all free


def test_a_backend_that_compiles_nothing_decodes_one_short_request():
    lane, decode = _lane(False, 8)
    lane.warm()
    assert decode.steps == [1, 1, 1, 1] and decode.requests == []


def test_the_ramp_fits_the_session_rows():
    """Each warm-up request asks for no more tokens than the session's rows hold."""
    lane, decode = _lane(True, 4, max_seq=64)
    asked = []
    real_add = decode.add
    decode.add = lambda prompt, max_new, t, s: (asked.append(len(prompt) + max_new + 13), real_add(prompt, max_new, t, s))[1]
    lane.warm()
    assert asked and max(asked) <= 64, asked
