"""Evaluating one candidate (in a worker process: a local pool's or a Ray task's).

Contract: `evaluate(job) -> record` compiles the candidate (its passes applied to the search's
input), has the guard judge it (out of process, against the declared target, on the guard
prompts), times it against the AR baseline (search/measure.py, on the timing prompts, disjoint
from the guard's) and token-forces the timed outputs too, so a candidate cannot behave one way
when checked and another when timed. A candidate that names a plugin (a --plugin file or an
agent's pass) does all of its compiling, generating and timing inside the sandbox
(search/sandbox.py); this process never imports plugin code, and the judge and the forcing of
timed outputs run outside the sandbox. The record's `status` is "validated" only when the guard
passed, the timed outputs passed forcing and the timing finished; `stages` holds each stage's seconds
(compile, guard, timing, forcing), and the candidate's worker.log says when each starts and ends
(and holds every thread's stack each STALL_DUMP_S seconds a stage runs, so a stall shows where).
"""
from __future__ import annotations

import contextlib
import faulthandler
import json
import sys
import time
import traceback
from pathlib import Path

from specir.errors import SpecirError

def _reference(declared: dict, device: str):
    """The declared target's reference, shared with the guard's judge in this worker (one load)."""
    from specir.declared_target import DeclaredTarget
    from specir.runtime.token_forcing import Reference
    return Reference.shared(DeclaredTarget.from_dict(declared), device)


def force_timed(job: dict, rounds: list, outputs: list) -> dict:
    """Token forcing of every timed output (and the count of tokens), as the guard judges."""
    from specir.guard.judge import count_outputs
    from specir.importers import resolve_source
    from specir.runtime.token_forcing import force
    from specir.guard.judge import _eos_ids
    prompts = [p for r in rounds for p in r]
    outs = [o for r in outputs for o in (r if isinstance(r, list) else [])]
    eos = _eos_ids(Path(resolve_source(job["declared"]["source"])))
    asked, produced, reasons = count_outputs(prompts, outs, job["max_new"], eos)
    if len(outs) != len(prompts):
        return {"ok": False, "reasons": reasons, "tokens_checked": 0}
    clean = [[int(t) for t in o[:job["max_new"]]] if isinstance(o, list) and all(isinstance(t, int) for t in o) else []
             for o in outs]
    report = force(_reference(job["declared"], job["reference_device"]), prompts, clean).as_dict()
    if report["non_finite"]:
        reasons.append("non-finite reference logits")
    ok = not reasons and report["ok"] and report["tokens_checked"] >= produced
    return {"ok": ok, "reasons": reasons, "tokens_checked": report["tokens_checked"],
            "mismatches": report["mismatches"], "near_ties": report["near_ties"], "tokens_asked": asked}


def _sandbox_parts(job: dict, folder: Path):
    from .sandbox import Limits, environment, sandboxed
    limits = Limits(wall_seconds=job["timeout"], memory_bytes=job["memory"], address_space=job["device"] == "cpu")
    env = environment(folder)
    return limits, env, (lambda argv: sandboxed(argv, folder, limits, env))


def _stage(job: dict, folder: Path, stage_job: dict, wrap, limits) -> dict:
    from .sandbox import run_limited
    name = stage_job["kind"]
    job_path, out_path = folder / f"{name}-job.json", folder / f"{name}-out.json"
    out_path.unlink(missing_ok=True)
    job_path.write_text(json.dumps(stage_job))
    with open(folder / f"{name}.log", "ab") as log:
        code, why = run_limited(wrap([sys.executable, "-m", "specir.search.stage", str(job_path), str(out_path)]),
                                limits=limits, log=log)
    if why:
        return {"killed": why}
    try:
        return json.loads(out_path.read_text())
    except (OSError, ValueError):
        return {"error": f"the sandboxed {name} stage exited (status {code}) without a result"}


@contextlib.contextmanager
def _stage_timed(record: dict, name: str):
    """Times one stage of the evaluation into record["stages"][name] (seconds) and says in the
    candidate's worker.log when it starts and ends, so a stalled candidate shows where it stalled."""
    start = time.perf_counter()
    print(f"{time.strftime('%H:%M:%S')} {name}: started", file=sys.stderr, flush=True)
    dumps = _dump_stacks_later(sys.stderr)
    try:
        yield
    finally:
        if dumps:
            faulthandler.cancel_dump_traceback_later()
        seconds = round(time.perf_counter() - start, 2)
        record.setdefault("stages", {})[name] = seconds
        print(f"{time.strftime('%H:%M:%S')} {name}: {seconds} s", file=sys.stderr, flush=True)


STALL_DUMP_S = 180.0  # a stage running this long writes every thread's stack into worker.log (and again as often)


def _dump_stacks_later(log) -> bool:
    """Every thread's Python stack into `log` each STALL_DUMP_S seconds the stage runs (faulthandler)."""
    try:
        faulthandler.dump_traceback_later(STALL_DUMP_S, repeat=True, file=log)
        return True
    except (ValueError, OSError, AttributeError):  # no file descriptor behind the log
        return False


def _log_tail(path: Path, lines: int = 6) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def evaluate(job: dict) -> dict:
    start = time.perf_counter()
    folder = Path(job["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    record = {"index": job["index"], "passes": job["passes"], "plugins": job["plugins"], "origin": job["origin"],
              "ir_digest": job.get("ir_digest"), "predicted": job.get("predicted"), "status": "", "verdict": None,
              "measured": None, "error": None, "folder": str(folder)}
    try:
        with open(folder / "worker.log", "a") as log, contextlib.redirect_stderr(log), contextlib.redirect_stdout(log):
            _evaluate(job, folder, record)
    except SpecirError as exc:
        record["status"] = record["status"] or "failed"
        record["error"] = exc.format()
    except Exception as exc:  # noqa: BLE001 - one candidate's crash is its record, not the search's
        record["status"] = "failed"
        record["error"] = f"{type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=4)
    from specir.device_memory import release
    try:
        release()  # what this candidate left (its compile, a failed timing) goes back before the next one
    except Exception as exc:  # noqa: BLE001 - a sticky device error must not replace the candidate's record
        record["release_error"] = f"{type(exc).__name__}: {exc}"
    record["seconds"] = round(time.perf_counter() - start, 2)
    return record


def _evaluate(job: dict, folder: Path, record: dict) -> None:
    sandboxed = bool(job["plugins"])
    build = folder / "build"
    compile_job = {"kind": "compile", "spec": job["spec"], "passes": job["passes"], "plugins": job["plugins"],
                   "target": job["target"], "out": str(build), "known": job.get("known") or []}
    with _stage_timed(record, "compile"):
        if sandboxed:
            limits, env, wrap = _sandbox_parts(job, folder)
            result = _stage(job, folder, compile_job, wrap, limits)
            record["sandbox"] = _applied(folder)
        else:
            from .stage import compile_candidate
            try:
                result = compile_candidate(compile_job)
            except SpecirError as exc:
                result = {"error": exc.format()}
    if "killed" in result:
        record["status"], record["error"] = "timed out", f"compiling the candidate was {result['killed']}"
        return
    if "error" in result:
        record["status"] = "import failed" if "plugin" in result["error"] else "compile failed"
        record["error"] = result["error"]
        return
    record["ir_digest"] = result["ir_digest"]
    if result["ir_digest"] in (job.get("known") or []):
        record["status"] = "duplicate"
        return
    if job.get("predict"):
        record["predicted"] = _predict(job, result["ir"])
    # the guard: out of process, against the declared target (the judge runs outside any sandbox)
    from specir.guard import GuardRequest, run_guard
    request = GuardRequest(str(build), job["guard_prompts"], job["max_new"], plugins=job["plugins"],
                           batch_size=job["batch_size"], device=job["reference_device"], timeout=job["timeout"])
    if sandboxed:
        request.sandbox = wrap([])  # the launcher, ending in its '--'
        request.sandbox_folder = str(folder / "guard")
    try:
        with _stage_timed(record, "guard"):
            verdict = run_guard(request)
    except SpecirError as exc:
        record["error"] = exc.format()
        # a guard that could not run for want of memory judged nothing: say so (still never validated)
        record["status"] = "out of memory" if "crashed: OutOfMemoryError" in record["error"] else "guard failed"
        return
    record["verdict"] = _short_verdict(verdict.as_dict())
    if not verdict.ok:
        record["status"] = "guard failed"
        record["error"] = "; ".join(verdict.reasons) or f"{record['verdict']['mismatches']} tokens mismatch the target"
        return
    # timing, then forcing of what the timed run produced
    from .measure import measure
    with _stage_timed(record, "timing"):
        measured = measure(build, Path(job["baseline_build"]), job["rounds"], job["max_new"], job["batch_size"],
                           device=job["device"], sandbox=wrap if sandboxed else None, folder=folder,
                           timeout=job["timeout"])
    with _stage_timed(record, "forcing"):
        forced = force_timed(job, job["rounds"], measured.outputs)
    record["timed_forcing"] = forced
    record["measured"] = measured.as_dict()
    if not forced["ok"]:
        record["status"] = "timed outputs failed"
        record["error"] = "; ".join(forced["reasons"]) or f"{forced.get('mismatches')} timed tokens mismatch the target"
        return
    record["status"] = "validated"


def _short_verdict(v: dict) -> dict:
    return {k: v.get(k) for k in ("ok", "tokens_asked", "tokens_produced", "tokens_checked", "mismatches", "near_ties",
                                  "non_finite", "reasons", "reference")}


def _applied(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "applied.json").read_text())
    except (OSError, ValueError):
        return None


def _predict(job: dict, ir_text: str) -> dict | None:
    """The cost model's prediction from the candidate's IR text (parsed, not verified: it may use
    ops that only its plugin defines; their cost is not counted)."""
    try:
        from specir.acceptance_model import Profile
        from specir.calibration import Calibration
        from specir.ir.parser import parse
        from specir.prediction import predict
        from specir.targets import get_target
        pipeline = parse(ir_text, "<candidate>")
        p = predict(pipeline, get_target(job["target"]), Calibration(**job["calibration"]),
                    Profile.from_dict(job["profile"]) if job.get("profile") else None, job["overhead_scale"])
        return p.as_dict()
    except Exception:  # noqa: BLE001 - an IR the cost model cannot read has no prediction
        return None
