"""The search's in-process timing gives a candidate's engine back after timing it (its sessions
and weights dropped, device memory released) and keeps the AR engine for the next candidate: a
worker that kept every candidate filled an H200 in six 8B candidates (session 15)."""
from __future__ import annotations

import contextlib
import io

import pytest

from specir.errors import SpecirError
from specir.step.engine import StepEngine


def test_a_timed_candidate_is_closed_and_the_baseline_kept(search_pair, tmp_path, monkeypatch):
    from specir.compiler import compile_pipeline
    from specir.search import measure as measure_mod
    spec, _ = search_pair
    with contextlib.redirect_stderr(io.StringIO()):
        compile_pipeline(spec, "cpu", tmp_path / "cand", "")
        compile_pipeline(spec, "cpu", tmp_path / "base", "")
    closed, released = [], []
    real_close = StepEngine.close
    monkeypatch.setattr(StepEngine, "close", lambda self: (closed.append(self), real_close(self))[1])
    monkeypatch.setattr("specir.device_memory.release", lambda: released.append(True))
    monkeypatch.setattr(measure_mod._InProcess, "_ar", {})
    rounds = [[[5, 6, 7, 8, 9]], [[9, 8, 7, 6]]]
    m = measure_mod.measure(tmp_path / "cand", tmp_path / "base", rounds, 4, 1, folder=tmp_path)
    assert m.speedup > 0 and len(m.outputs) == 2
    (ar,) = measure_mod._InProcess._ar.values()
    assert closed and all(e is not ar for e in closed), "the candidate's engine is closed, the AR engine kept"
    assert closed[0].sessions == {} and closed[0].executors == {}
    assert "_executors" not in vars(closed[0].backend), "the backend forgets the executors (their weights) too"
    with pytest.raises(SpecirError, match="closed"):
        closed[0].generate([[5, 6, 7]], 2)
    assert ar.sessions, "the kept AR engine keeps its warm session"
    assert released, "device memory is released after the candidate"
