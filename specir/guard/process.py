"""Running one guard stage in a fresh Python process: `python -m MODULE JOB.json OUT.json`.

Contract: `run_stage(module, job, timeout)` writes `job` as JSON, starts the module in its own
session (process group), relays everything it prints to our stderr line by line, kills the whole
group when `timeout` seconds pass, and returns the JSON object the stage wrote to OUT.json, or
{"timeout": True} / {"died": status} when it wrote none.

Without a `prefix` the stage is forked from this process's warm stage server (stage_server.py: the
same clean start without importing torch, transformers and TVM again); with one (a sandbox launcher),
or where the server cannot take it, it is a fresh `python -m MODULE` process.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ..parent_death import child_environment


def _relay(stream) -> None:
    for line in iter(stream.readline, b""):
        sys.stderr.write(line.decode(errors="replace"))
        sys.stderr.flush()
    stream.close()


def run_stage(module: str, job: dict, timeout: float | None = None, prefix: list[str] | tuple = (),
              folder: str | None = None) -> dict:
    """`prefix`: a command line that runs the stage (e.g. a sandbox launcher, ending in its `--`);
    `folder`: where the job and result files live (a sandbox's own folder), else a temp folder."""
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="specir-guard-", dir=folder or None) as tmp:
        job_path, out_path = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_path.write_text(json.dumps(job))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        status = _MISSING
        if not prefix:
            status = _run_forked(module, [job_path, out_path], Path(tmp) / "stage.log", env, timeout)
        if status is _MISSING:
            status = _run_fresh([*prefix, sys.executable, "-m", module, str(job_path), str(out_path)], env, timeout)
        if status is None:
            return {"timeout": True}
        try:
            result = json.loads(out_path.read_text())
        except (OSError, ValueError):
            return {"died": status}
    return result if isinstance(result, dict) else {"died": status}


_MISSING = object()


def _run_fresh(argv: list, env: dict, timeout: float | None) -> int | None:
    """`argv` as a new process in its own session, its output relayed; its exit status, None on timeout."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=child_environment(env), start_new_session=True)  # the stage dies with us
    relay = threading.Thread(target=_relay, args=(proc.stdout,), daemon=True)
    relay.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        relay.join(timeout=5)
    return proc.returncode


def _run_forked(module: str, argv: list, log: Path, env: dict, timeout: float | None):
    """The stage forked from the stage server, its log relayed; its exit status, None on timeout, or
    _MISSING when no server could take it (the caller starts a fresh process)."""
    from .stage_server import StageServerError, forget, server_for
    server = server_for(env)
    if server is None:
        return _MISSING
    log.touch()
    done = threading.Event()
    relay = threading.Thread(target=_tail, args=(log, done), daemon=True)
    relay.start()
    try:
        return server.run(module, argv, log, env, timeout)
    except StageServerError as exc:
        forget(server)
        # a stage that had begun is not run twice (its group is killed): it died with its server
        return -signal.SIGKILL if exc.started else _MISSING
    finally:
        done.set()
        relay.join(timeout=5)


def _tail(log: Path, done: threading.Event) -> None:
    """Relay `log`'s lines to our stderr as they are written, until `done` and the file's end."""
    with open(log, "rb") as f:
        pending = b""
        while True:
            finished = done.is_set()
            chunk = f.read()
            if chunk:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    sys.stderr.write(line.decode(errors="replace") + "\n")
                sys.stderr.flush()
            elif finished:
                break
            else:
                done.wait(0.05)
        if pending:
            sys.stderr.write(pending.decode(errors="replace"))
            sys.stderr.flush()


def stage_main(fn, argv: list[str]) -> int:
    """The body of a stage's `__main__`: read the job, write `fn(job)` or {"error": formatted message}."""
    from ..errors import SpecirError
    from ..parent_death import die_with_parent
    die_with_parent()  # a stage never outlives the process waiting for its result
    job_path, out_path = argv
    with open(job_path) as f:
        job = json.load(f)
    try:
        result, code = fn(job), 0
    except SpecirError as exc:
        result, code = {"error": exc.format()}, 2
    except SystemExit as exc:
        result, code = {"error": f"specir: error: the process exited ({exc.code}) before it finished"}, 2
    except Exception as exc:  # noqa: BLE001 - a crash of the candidate is a verdict, not a traceback
        result, code = {"error": f"specir: error: crashed: {type(exc).__name__}: {exc}"}, 2
    with open(out_path, "w") as f:
        json.dump(result, f)
    return code
