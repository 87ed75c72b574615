"""A candidate stage that runs long writes every thread's stack into its worker.log, so a stalled
search shows where each candidate waits."""
from __future__ import annotations

import contextlib
import time


def _a_stalled_stage():
    time.sleep(1.3)


def test_a_long_stage_dumps_its_stacks_into_the_log(tmp_path, monkeypatch):
    from specir.search import evaluate
    monkeypatch.setattr(evaluate, "STALL_DUMP_S", 0.5)
    record = {}
    with open(tmp_path / "worker.log", "a") as log, contextlib.redirect_stderr(log):
        with evaluate._stage_timed(record, "timing"):
            _a_stalled_stage()
        with evaluate._stage_timed(record, "forcing"):
            pass
        time.sleep(0.8)  # cancelled with its stage: nothing more is written
    text = (tmp_path / "worker.log").read_text()
    assert "timing: started" in text and "_a_stalled_stage" in text
    assert text.count("_a_stalled_stage") >= 2  # again every STALL_DUMP_S
    assert text.rstrip().splitlines()[-1].split()[1:] == ["forcing:", str(record["stages"]["forcing"]), "s"]
