"""Timing a candidate against the autoregressive baseline: the one place the search times anything.

Contract: `measure(build, baseline_build, rounds, max_new, batch_size, ...)` times the candidate's
build and the AR baseline of the target (from `baseline_build`, which loads no plugin). A
candidate that runs plugin code (`sandbox` given) is timed in a timing process of its own inside
the sandbox (search/timer.py), against an AR timing process; a build of built-in passes only is
timed in this process (the AR engine is kept between candidates). Holding the device's
timing lock (one timing at a time per device: `device_lock`), it alternates rounds: AR on round r's
prompts, then the candidate on the same prompts; the process not being timed is stopped (SIGSTOP),
so a candidate cannot slow the baseline down. Wall time is measured here, between sending a
request and reading its answer. Returns `Measurement`: per round tokens/s of both and their ratio;
speedup is the median ratio, tau the mean accepted length; `outputs` per round, which the caller
must token-force (the timed run is checked, not only the guarded one).
When the engine is redesigned, this module is what follows it.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from specir.errors import SpecirError
from specir.parent_death import child_environment


@dataclass
class Measurement:
    speedup: float
    tokens_per_s: float
    ar_tokens_per_s: float
    tau: float
    rounds: list = field(default_factory=list)  # {"tokens_per_s", "ar_tokens_per_s", "ratio", "tokens"}
    outputs: list = field(default_factory=list)  # per round: the candidate's outputs
    ar_outputs: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"speedup": self.speedup, "tokens_per_s": self.tokens_per_s, "ar_tokens_per_s": self.ar_tokens_per_s,
                "tau": self.tau, "rounds": self.rounds}


@contextmanager
def device_lock(device: str):
    """Exclusive timing of `device` ("cpu", "cuda:0", ...) across every process on this machine."""
    path = Path(tempfile.gettempdir()) / f"specir-timing-{device.replace(':', '')}.lock"
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # say who holds it (the holder wrote its pid), then wait
            f.seek(0)
            holder = f.read().strip() or "another process"
            print(f"{time.strftime('%H:%M:%S')} waiting for the timing lock of {device} ({path}), held by "
                  f"pid {holder}", file=sys.stderr, flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class _Timer:
    def __init__(self, argv: list[str], env: dict, log: Path, timeout: float):
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=child_environment(env), start_new_session=True)
        self.timeout = timeout
        self.ready = self._read()

    def _read(self) -> dict:
        box: dict = {}

        def read():
            box["line"] = self.proc.stdout.readline()
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(self.timeout)
        if reader.is_alive():
            self.close()
            raise TimeoutError(f"no answer within {self.timeout:g} s")
        line = box.get("line") or b""
        if not line:
            raise RuntimeError(f"the timing process exited (status {self.proc.poll()})")
        try:
            return json.loads(line)
        except ValueError:
            raise RuntimeError("the timing process wrote something that is not the protocol") from None

    def ask(self, prompts, max_new: int, batch: int) -> tuple[dict, float]:
        start = time.perf_counter()
        self.proc.stdin.write((json.dumps({"prompts": prompts, "max_new": max_new, "batch": batch}) + "\n").encode())
        self.proc.stdin.flush()
        answer = self._read()
        return answer, time.perf_counter() - start

    def signal(self, sig) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()


class _InProcess:
    """A trusted build (no plugin) timed in this process; the AR engine is kept per process."""
    _ar: dict = {}

    def __init__(self, source: Path, mode: str):
        from .timer import _engine
        key = str(Path(source).resolve())
        self.kept = mode == "ar"
        if mode == "ar" and key in self._ar:
            self.engine = self._ar[key]
        else:
            self.engine = _engine(str(source), mode)
            self.engine.generate([[1, 2, 3, 4]], 4)
            if mode == "ar":
                self._ar[key] = self.engine
        self.ready = {"ready": self.engine.backend.name}

    def ask(self, prompts, max_new: int, batch: int) -> tuple[dict, float]:
        outputs, accepts = [], []
        start = time.perf_counter()
        for i in range(0, len(prompts), batch):
            for r in self.engine.generate(prompts[i:i + batch], max_new):
                outputs.append(list(r.tokens))
                accepts.append(list(r.accept_lengths))
        return {"outputs": outputs, "accept_lengths": accepts}, time.perf_counter() - start

    def signal(self, sig) -> None:
        pass

    def close(self) -> None:
        """A candidate's engine is dropped and its device memory given back (the AR engine is kept):
        a worker that kept every candidate's weights filled an H200 in six 8B candidates, and the
        guard's child of the next one ran out of memory."""
        if not self.kept and self.engine is not None:
            from specir.device_memory import release
            engine, self.engine = self.engine, None
            try:
                engine.close()
            finally:
                del engine
                release()


def _timer_argv(source: Path, mode: str) -> list[str]:
    return [sys.executable, "-m", "specir.search.timer", str(source), mode]


def _tokens(outputs) -> int:
    return sum(len(o) for o in outputs) if isinstance(outputs, list) else 0


def measure(build: Path, baseline_build: Path, rounds: list[list[list[int]]], max_new: int, batch_size: int, *,
            device: str = "cpu", env: dict | None = None, sandbox=None, folder: Path, timeout: float = 600.0,
            baseline_env: dict | None = None) -> Measurement:
    """See the module docstring. `sandbox(argv) -> argv` wraps the candidate's command; `env` is its
    environment. Raises SpecirError when the candidate cannot be timed (the message says why)."""
    cand = ar = None
    try:
        try:
            if sandbox is None:  # a build of built-in passes only: trusted, timed in this process
                cand = _InProcess(build, "pipeline")  # assigned first: closed even if AR's engine fails
                ar = _InProcess(baseline_build, "ar")
            else:
                cand = _Timer(sandbox(_timer_argv(build, "pipeline")), env or dict(os.environ), folder / "timer.log",
                              timeout)
                ar = _Timer(_timer_argv(baseline_build, "ar"), baseline_env or dict(os.environ),
                            folder / "timer-ar.log", timeout)
        except (TimeoutError, RuntimeError) as exc:
            raise SpecirError(f"the timing process did not start: {exc}", path=str(folder / "timer.log")) from None
        for t, name in ((cand, "candidate"), (ar, "baseline")):
            if "error" in t.ready:
                raise SpecirError(f"the {name} timing process failed: {t.ready['error']}")
        results, outs, ar_outs, accepts = [], [], [], []
        with device_lock(device):
            for prompts in rounds:
                cand.signal(signal.SIGSTOP)
                try:
                    a_ans, a_s = ar.ask(prompts, max_new, batch_size)
                finally:
                    cand.signal(signal.SIGCONT)
                ar.signal(signal.SIGSTOP)
                try:
                    c_ans, c_s = cand.ask(prompts, max_new, batch_size)
                finally:
                    ar.signal(signal.SIGCONT)
                c_tok, a_tok = _tokens(c_ans.get("outputs")), _tokens(a_ans.get("outputs"))
                results.append({"tokens": c_tok, "seconds": c_s, "ar_seconds": a_s, "tokens_per_s": c_tok / c_s,
                                "ar_tokens_per_s": a_tok / a_s, "ratio": (c_tok / c_s) / (a_tok / a_s) if a_tok else 0.0})
                outs.append(c_ans.get("outputs"))
                ar_outs.append(a_ans.get("outputs"))
                accepts += [n for seq in c_ans.get("accept_lengths") or [] for n in seq]
    except (TimeoutError, RuntimeError) as exc:
        raise SpecirError(f"timing failed: {exc}", path=str(folder)) from None
    finally:
        for t in (cand, ar):
            if t is not None:
                t.close()
    tau = sum(accepts) / len(accepts) if accepts else 0.0
    return Measurement(statistics.median(r["ratio"] for r in results),
                       statistics.median(r["tokens_per_s"] for r in results),
                       statistics.median(r["ar_tokens_per_s"] for r in results), tau, results, outs, ar_outs)
