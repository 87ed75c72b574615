"""A guard that cannot run for want of device memory is recorded as "out of memory", not as a
candidate that failed its guard (session 15: six tree candidates read "guard failed" on the H200
when the worker held every earlier candidate's engine); either way it is never validated."""
from __future__ import annotations

from specir.errors import SpecirError


def _job(tmp_path) -> dict:
    return {"index": 3, "passes": "tree-verify", "plugins": [], "origin": "proposer", "folder": str(tmp_path / "c"),
            "spec": "p.spec", "target": "h200", "known": [], "guard_prompts": [[1, 2, 3, 4]], "max_new": 4,
            "batch_size": 1, "reference_device": "cuda", "timeout": 60, "memory": 1 << 30, "device": "cuda:0"}


def _evaluate_with_guard_error(tmp_path, monkeypatch, message: str) -> dict:
    import specir.guard
    from specir.search import evaluate, stage
    monkeypatch.setattr(stage, "compile_candidate", lambda job: {"ir_digest": "sha256:ab", "ir": "", "build": job["out"]})

    def guard(request):
        raise SpecirError(message)
    monkeypatch.setattr(specir.guard, "run_guard", guard)
    return evaluate.evaluate(_job(tmp_path))


def test_an_out_of_memory_guard_is_named_so(tmp_path, monkeypatch):
    rec = _evaluate_with_guard_error(tmp_path, monkeypatch, "crashed: OutOfMemoryError: CUDA out of memory. "
                                                            "Tried to allocate 32.00 MiB")
    assert rec["status"] == "out of memory" and "CUDA out of memory" in rec["error"]


def test_any_other_guard_error_fails_the_guard(tmp_path, monkeypatch):
    rec = _evaluate_with_guard_error(tmp_path, monkeypatch, "crashed: RuntimeError: bad")
    assert rec["status"] == "guard failed"
