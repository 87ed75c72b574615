"""Guard stages forked from a warm, clean server instead of started as fresh interpreters.

A fresh `python -m specir.guard.child` spends 5-9 s importing torch, transformers and TVM before it reads
its job: a check pays that once, a search once per candidate, the test suite a few hundred times.

`python -m specir.guard.stage_server` is a fresh interpreter that imports those libraries and specir's own
runtime (PRELOAD: never a plugin, a pass entry point or anything a user wrote), then forks one child per
stage. A forked child starts from the server's memory, in which no foreign code ever ran, so it is as
clean as a fresh interpreter; it then does what `python -m MODULE JOB OUT` does: its own session (process
group), stdin from /dev/null, stdout and stderr to the stage's log, the requester's working directory and
environment, `MODULE` run as `__main__`. The server ends with the process that started it (and its
children with it: die_with_parent).

Client side, `server_for(env)`: one server per (requesting process, environment), started on the first
stage and kept; a request in another environment starts another (at most MAX_SERVERS live), since the
libraries read some variables at import. Where CUDA is visible stages fork too (FORK_ON_CUDA, on since a GPU
check; off, they would be fresh processes there).
`StageServer.run` returns the stage's exit status, or None when
`timeout` passed (the stage's process group is killed). Protocol: JSON lines on the server's stdin and
stdout: {"ready": pid}; {"id", "module", "argv", "log", "cwd", "env"} -> {"id", "pid"}, then
{"id", "exit"} when the child ends.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# the stage modules themselves (specir.guard.child, .judge) are not preloaded: runpy runs them as __main__ afresh
PRELOAD = ("numpy", "torch", "safetensors", "transformers", "tvm", "triton",
           "specir.runtime.session", "specir.runtime.token_forcing", "specir.plugins", "specir.guard.process")
MAX_SERVERS = 2
# Whether stages fork where the requester sees a CUDA device too (else fresh processes there). The server starts no
# CUDA (NVML's device check, and it refuses to serve once torch's CUDA is up); each forked stage starts its own. On
# since session 32: on an H100 the GPU test of tests/guard/test_stage_server.py and the README's GPU pipelines through
# `specir check` passed with it (bench/results/gpu-2026-12-07-session32, call3).
FORK_ON_CUDA = True
READY_TIMEOUT_S = 300.0
# variables that change between a process's requests without bearing on what the libraries imported
VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})


class StageServerError(RuntimeError):
    """The server could not run a stage. `started`: the stage had begun (it is killed, and is not run again);
    otherwise the caller runs it as a fresh process."""

    def __init__(self, message: str, started: bool = False):
        super().__init__(message)
        self.started = started


# ---------------------------------------------------------------------------------------- in the server

_PROTOCOL_FD = [1]  # the server's replies; its stdout (fd 1) goes to stderr, so a library's print cannot corrupt them


def _send(message: dict) -> None:
    os.write(_PROTOCOL_FD[0], (json.dumps(message) + "\n").encode())


def _child(request: dict, server_pid: int) -> None:
    """The forked child: become `python -m MODULE ARGV...` in the requester's setting; never returns."""
    code = 1
    try:
        os.setsid()
        os.close(_PROTOCOL_FD[0])  # else the requester would not see the server's end if the server died
        _set_dumpable(True)  # the server is not (serve); its children are, as fresh processes are
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(devnull)
        os.chdir(request["cwd"])
        from ..parent_death import PARENT_VARIABLE
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[PARENT_VARIABLE] = str(server_pid)  # die_with_parent: this child's parent is the server
        sys.path[0] = request["cwd"]  # as `python -m` puts the working directory first
        sys.argv = [request["module"], *request["argv"]]
        import runpy
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - as an uncaught exception ends `python -m`
            import traceback
            traceback.print_exc()
            code = 1
        _finish_as_a_process_would()
    finally:
        os._exit(code)


def _finish_as_a_process_would() -> None:
    """What interpreter exit does that os._exit skips: the atexit handlers, then Python's and C's stdio flushed."""
    import atexit
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - as at exit: reported, not raised
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


PR_SET_DUMPABLE = 4


def _set_dumpable(on: bool) -> None:
    """prctl(PR_SET_DUMPABLE): a server that is not dumpable cannot be traced, nor its /proc fds opened, by the
    same user's processes (a plugin in one of its children)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, int(on), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def serve() -> int:
    """The server's loop: preload, report ready, then fork a child per request and report its exit."""
    import importlib

    from ..parent_death import die_with_parent
    die_with_parent()
    _set_dumpable(False)
    _PROTOCOL_FD[0] = os.dup(1)
    os.dup2(2, 1)
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # torch.cuda.is_available() without starting the driver
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a library that does not import is one a stage imports itself
            pass
    from ..pass_infra.registry import foreign_code_loaded
    if foreign_code_loaded():  # never: the preloads are specir's own; a server that is not clean serves nothing
        return 1
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():  # a forked child could not use it
        return 1
    me = os.getpid()
    _send({"ready": me})
    pending, children, open_ = b"", {}, True
    while open_ or children:  # after the requester's end closes, the stages running finish (they die with us)
        readable, _, _ = select.select([0] if open_ else [], [], [], 0.05)
        if readable:
            chunk = os.read(0, 1 << 16)
            open_ = bool(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(request, me)
                children[pid] = request["id"]
                _send({"id": request["id"], "pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _send({"id": children.pop(pid), "exit": os.waitstatus_to_exitcode(status)})
    return 0


# ---------------------------------------------------------------------------------------- in the requester

class StageServer:
    """A started server (see the module docstring); `run` may be called from several threads."""

    def __init__(self, env: dict):
        from ..parent_death import child_environment
        self.key = _env_key(env)
        self.proc = subprocess.Popen([sys.executable, "-m", "specir.guard.stage_server"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=child_environment(env), start_new_session=True)
        self._lock = threading.Lock()
        self._next_id = 0
        self._users = 0
        self._waiting: dict[int, dict] = {}  # id -> {"pid": ..., "exit": ..., "event": ...}
        self._ready = threading.Event()
        self._was_ready = False
        self._gone = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        """Dispatch the server's replies; on its end (or a reply that is not the protocol's), wake every waiter."""
        try:
            for line in self.proc.stdout:
                message = json.loads(line)
                if "ready" in message:
                    self._was_ready = True
                    self._ready.set()
                    continue
                with self._lock:
                    slot = self._waiting.get(message["id"])
                if slot is not None:
                    slot.update({k: v for k, v in message.items() if k != "id"})
                    slot["event"].set()
        except (ValueError, KeyError, TypeError, OSError):
            pass
        finally:
            self._gone = True
            self._ready.set()
            with self._lock:
                for slot in self._waiting.values():
                    slot["event"].set()

    def alive(self) -> bool:
        return not self._gone and self.proc.poll() is None

    def busy(self) -> bool:
        """A stage is running or waiting for the server to become ready."""
        with self._lock:
            return self._users > 0

    def failed_to_start(self) -> bool:
        return self._gone and not self._was_ready

    def run(self, module: str, argv: list[str], log: Path, env: dict, timeout: float | None) -> int | None:
        """Run `python -m module *argv` as a forked child writing to `log`; its exit status, or None after a
        timeout (its process group killed). StageServerError when the server cannot take it."""
        with self._lock:
            self._users += 1
        try:
            return self._run(module, argv, log, env, timeout)
        finally:
            with self._lock:
                self._users -= 1

    def _run(self, module: str, argv: list[str], log: Path, env: dict, timeout: float | None) -> int | None:
        if not self._ready.wait(READY_TIMEOUT_S) or not self.alive():
            raise StageServerError("the stage server did not start")
        try:
            cwd = os.getcwd()
        except OSError as exc:  # the working directory is gone: a fresh process copes with that
            raise StageServerError(f"no working directory: {exc}") from exc
        with self._lock:
            self._next_id += 1
            rid = self._next_id
            slot = self._waiting[rid] = {"event": threading.Event()}
            request = {"id": rid, "module": module, "argv": [str(a) for a in argv], "log": str(log),
                       "cwd": cwd, "env": env}
            try:
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                del self._waiting[rid]
                raise StageServerError(f"the stage server went away: {exc}") from exc
        try:
            return self._wait(slot, timeout)
        finally:
            with self._lock:
                self._waiting.pop(rid, None)

    def _until(self, slot: dict, done, seconds: float | None) -> bool:
        """Wait until done() or the server is gone, at most `seconds` (None: no limit); True when done()."""
        deadline = None if seconds is None else time.monotonic() + seconds
        event = slot["event"]
        while not done():
            if self._gone:
                return done()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            event.wait(1.0 if left is None else min(left, 1.0))  # re-checked each second: no wake-up is lost
            event.clear()
        return True

    def _wait(self, slot: dict, timeout: float | None) -> int | None:
        if not self._until(slot, lambda: "pid" in slot, 60.0):  # the fork is immediate
            raise StageServerError("the stage server did not start the stage")
        if self._until(slot, lambda: "exit" in slot, timeout):
            return slot["exit"]
        _kill_group(slot["pid"])
        if self._gone:
            raise StageServerError("the stage server went away during the stage", started=True)
        self._until(slot, lambda: "exit" in slot, 30.0)
        return None

    def close(self) -> None:
        """End the server once its running stages finish (it stops taking requests at once)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


_servers: dict[tuple, StageServer] = {}
_failed: set[tuple] = set()  # environments whose server did not start: their stages are fresh processes
_servers_lock = threading.Lock()


def _env_key(env: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if k not in VOLATILE))


def server_for(env: dict) -> StageServer | None:
    """This process's server for `env` (started now if there is none), or None where forking is not
    available (not POSIX) or this environment's server did not start before."""
    if not hasattr(os, "fork") or not hasattr(os, "setsid") or (not FORK_ON_CUDA and _cuda_visible()):
        return None
    key = _env_key(env)
    evicted = []
    with _servers_lock:
        if key in _failed:
            return None
        server = _servers.get(key)
        if server is not None and server.alive():
            _servers[key] = _servers.pop(key)  # most recently used last
            return server
        _servers.pop(key, None)
        for old in list(_servers):  # the least recently used idle ones make room
            if len(_servers) < MAX_SERVERS:
                break
            if not _servers[old].busy():
                evicted.append(_servers.pop(old))
        server = _servers[key] = StageServer(env)
    for old in evicted:
        old.close()
    return server


def _cuda_visible() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch, or no driver: no CUDA
        return False


def forget(server: StageServer) -> None:
    """Drop a server that failed; one that never became ready is not tried again for its environment."""
    with _servers_lock:
        if _servers.get(server.key) is server:
            del _servers[server.key]
        if server.failed_to_start():
            _failed.add(server.key)
    server.close()


def _forget_inherited() -> None:
    """In a process forked from a requester: its servers' pipes are the parent's, so this one starts its own."""
    global _servers_lock
    _servers.clear()
    _servers_lock = threading.Lock()


def _close_all() -> None:
    with _servers_lock:
        for server in _servers.values():
            server.close()
        _servers.clear()


import atexit  # noqa: E402

atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited)

if __name__ == "__main__":
    sys.exit(serve())
