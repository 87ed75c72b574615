"""DecodeSession: continuous batching keeps each request's output equal to a batch of one, and a
long-lived session can forget finished requests without disturbing the active ones."""
from __future__ import annotations

from specir.load import load_pipeline
from specir.runtime.session import make_engine
from tests.helpers.specs import write_spec


def test_forget_finished_keeps_active_requests(pair, tmp_path):
    target, drafter = pair
    engine = make_engine(load_pipeline(write_spec(tmp_path, "p", target, drafter)), "reference", "cpu", None)
    short, long_ = [5, 9, 2, 7], [3, 1, 4, 1, 5, 9, 2, 6]
    want_short = engine.generate([short], 3)[0].tokens
    want_long = engine.generate([long_], 20)[0].tokens
    decode = engine.open(2, engine.rows_needed(len(long_), 20), sampling=True)
    a = decode.add(short, 3)
    b = decode.add(long_, 20)
    while not a.done:
        decode.step()
    assert decode.step_seconds
    decode.forget_finished()
    assert decode.requests == [b] and decode.step_seconds == []
    c = decode.add(short, 3)  # the freed slot is taken again
    while decode.active():
        decode.step()
    assert (a.generated, b.generated, c.generated) == (want_short, want_long, want_short)
    decode.forget_finished()
    assert decode.requests == []
