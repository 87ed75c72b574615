"""The sandbox that agent-written and plugin passes run in: `python -m specir.search.sandbox`.

Contract: `sandboxed(argv, folder, limits)` returns the command line that runs `argv` inside the
sandbox; the launcher restricts itself, then execs `argv`, so every process it starts (the guard's
judge and child included) inherits the restrictions:
- writes only beneath `folder` (and /dev/null): Landlock, when the kernel has it (ABI >= 1);
- no network: a new network namespace (inside a new user namespace when unprivileged: only a
  loopback interface that is down), plus Landlock's TCP rules (ABI >= 4) where available;
- no signals to processes outside the sandbox: Landlock scoping (ABI >= 6);
- memory: RLIMIT_AS (CPU targets; CUDA maps more address space than it uses) plus the caller's
  resident-set watchdog (`run_limited`); wall time: the caller kills the whole process group.
Reads are not restricted (Python, torch and the checkpoints must be readable).
Whatever is not available is skipped and named in `notes` (`probe()`, and `applied.json` in the
folder), never silently: the search report carries them.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from specir.parent_death import die_with_parent

# x86_64 / aarch64 share these (the generic syscall table numbers Landlock identically)
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWPID = 0x10000000, 0x40000000, 0x20000000
# filesystem accesses that change something (reads, read_dir and execute stay unrestricted)
FS_WRITE_FILE, FS_REMOVE_DIR, FS_REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
FS_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
FS_REFER, FS_TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 600.0
    memory_bytes: int = 8 << 30
    address_space: bool = True  # RLIMIT_AS (off for GPU targets)


@dataclass
class Applied:
    landlock_abi: int = 0
    writes_confined: bool = False
    network: str = "open"  # "none (netns)" | "no TCP (landlock)" | "open"
    signals_scoped: bool = False
    pid_namespace: bool = False  # nothing the sandboxed code starts outlives it
    address_space_limit: int | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return int(abi) if abi > 0 else 0


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _write_access(abi: int) -> int:
    access = FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE
    if abi >= 2:
        access |= FS_REFER
    if abi >= 3:
        access |= FS_TRUNCATE
    return access


def _landlock(folder: Path, applied: Applied) -> None:
    abi = landlock_abi()
    applied.landlock_abi = abi
    if abi < 1:
        applied.notes.append("Landlock is not available in this kernel: writes are NOT confined to the folder")
        return
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    attr = _RulesetAttr(_write_access(abi), NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                      ctypes.c_uint32(0))
    if fd < 0:
        applied.notes.append(f"landlock_create_ruleset failed (errno {ctypes.get_errno()}): writes are NOT confined")
        return
    try:
        for path, access in ((folder, _write_access(abi)), (Path("/dev/null"), FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0))):
            pfd = os.open(str(path), os.O_PATH | (os.O_DIRECTORY if path.is_dir() else 0))
            try:
                rule = _PathBeneath(access, pfd)
                if libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(fd),
                                ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(pfd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    except OSError as exc:
        applied.notes.append(f"Landlock could not be applied ({exc}): writes are NOT confined")
        return
    finally:
        os.close(fd)
    applied.writes_confined = True
    applied.signals_scoped = abi >= 6
    if abi >= 4 and applied.network == "open":
        applied.network = "no TCP (landlock)"
    if abi < 6:
        applied.notes.append(f"Landlock ABI {abi} < 6: signals to processes outside the sandbox are not scoped")


def _unshare_network(applied: Applied) -> None:
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID) == 0:
        applied.pid_namespace = True
        try:
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        except OSError as exc:
            applied.notes.append(f"user namespace id maps failed ({exc})")
        applied.network = "none (netns)"
        return
    errno = ctypes.get_errno()
    if libc.unshare(CLONE_NEWNET) == 0:  # privileged, but user namespaces are off
        applied.network = "none (netns)"
        applied.notes.append(f"user namespaces unavailable (errno {errno}); a network namespace without one")
        return
    applied.notes.append(f"network namespaces unavailable (errno {ctypes.get_errno()}): network is NOT cut "
                         "off by a namespace")


def restrict(folder: Path, limits: Limits) -> Applied:
    """Apply every restriction this kernel allows to the calling process (irreversible)."""
    applied = Applied()
    _unshare_network(applied)
    if limits.address_space:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
            applied.address_space_limit = limits.memory_bytes
        except (ValueError, OSError) as exc:
            applied.notes.append(f"RLIMIT_AS not set ({exc})")
    else:
        applied.notes.append("no address-space limit (GPU target); the resident-set watchdog limits memory")
    _landlock(folder, applied)
    if applied.network == "open":
        applied.notes.append("the sandboxed code can reach the network")
    return applied


def environment(folder: Path) -> dict:
    """The variables sandboxed processes get (`sandboxed(..., env=)`): temp files, caches and Python's bytecode under `folder`;
    the user's compiled-kernel and file caches (specir.file_cache.CACHES) are copied in first (they are read, not shared)."""
    import shutil
    from specir.user_cache import cache_root
    cache = folder / "cache"
    (cache / "tvm").mkdir(parents=True, exist_ok=True)
    (folder / "tmp").mkdir(exist_ok=True)
    user = cache_root()
    from specir.file_cache import CACHES
    for name in CACHES:  # checkpoint digests, BF12 statistics: an 8B candidate would recompute minutes of them
        if (user / f"{name}.json").is_file() and not (cache / f"{name}.json").exists():
            shutil.copy2(user / f"{name}.json", cache / f"{name}.json")
    tvm = Path(os.environ.get("SPECIR_TVM_CACHE") or user / "tvm")
    if tvm.is_dir():
        for f in tvm.iterdir():
            if f.is_file() and not (cache / "tvm" / f.name).exists():
                shutil.copy2(f, cache / "tvm" / f.name)
    return {"TMPDIR": str(folder / "tmp"), "SPECIR_CACHE": str(cache), "SPECIR_TVM_CACHE": str(cache / "tvm"),
            "TRITON_CACHE_DIR": str(cache / "triton"), "PYTHONPYCACHEPREFIX": str(folder / "pycache"),
            "HOME": str(folder), "PYTHONUNBUFFERED": "1"}


def sandboxed(argv: list[str], folder: Path, limits: Limits, env: dict | None = None) -> list[str]:
    """The command that runs `argv` in the sandbox of `folder`; `env`: variables it sets first."""
    sets = [f"--setenv={k}={v}" for k, v in (env or {}).items()]
    return [sys.executable, "-m", "specir.search.sandbox", "--folder", str(folder), "--memory", str(limits.memory_bytes),
            *(["--no-address-space"] if not limits.address_space else []), *sets, "--", *argv]


def _rss_of_session(sid: int) -> int:
    """Resident bytes of every process in session `sid` (Linux /proc)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) != sid:  # field 6: session id
                continue
            total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # field 24: rss pages
        except (OSError, ValueError, IndexError):
            continue
    return total


def run_limited(argv: list[str], *, env: dict | None = None, cwd: str | None = None, limits: Limits,
                stdin=subprocess.DEVNULL, log=None) -> tuple[int | None, str]:
    """Run `argv` in its own session; kill the whole session past the wall time or the memory limit.
    Returns (exit status or None when killed, why it was killed or "")."""
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=log or subprocess.DEVNULL,
                            stderr=subprocess.STDOUT if log else subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + limits.wall_seconds
    why = ""
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                why = f"killed after the wall-time limit of {limits.wall_seconds:g} s"
                break
            if _rss_of_session(proc.pid) > limits.memory_bytes:
                why = f"killed over the memory limit of {limits.memory_bytes / 2**30:.1f} GiB"
                break
            time.sleep(0.2)
    finally:
        kill_session(proc)
    return (None if why else proc.returncode), why


def kill_session(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@lru_cache(maxsize=1)
def probe() -> dict:
    """What this machine's sandbox actually enforces: runs the launcher on a scratch folder and tries
    to write outside it and to open a socket."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="specir-sandbox-probe-") as tmp:
        folder = Path(tmp) / "box"
        folder.mkdir()
        outside = Path(tmp) / "outside.txt"
        code = ("import json, socket, pathlib, sys\n"
                f"res = {{'write_inside': False, 'write_outside': False, 'socket': False}}\n"
                f"pathlib.Path({str(folder / 'x')!r}).write_text('x'); res['write_inside'] = True\n"
                "try:\n"
                f"    pathlib.Path({str(outside)!r}).write_text('x'); res['write_outside'] = True\n"
                "except OSError: pass\n"
                "try:\n"
                "    s = socket.create_connection(('127.0.0.1', 9), timeout=1); res['socket'] = True\n"
                "except OSError as e: res['socket'] = 'refused' if isinstance(e, ConnectionRefusedError) else False\n"
                f"pathlib.Path({str(folder / 'probe.json')!r}).write_text(json.dumps(res))\n")
        cmd = sandboxed([sys.executable, "-c", code], folder, Limits(wall_seconds=60))
        code_, why = run_limited(cmd, env=dict(os.environ), limits=Limits(wall_seconds=60))
        try:
            result = json.loads((folder / "probe.json").read_text())
            applied = json.loads((folder / "applied.json").read_text())
        except (OSError, ValueError):
            return {"ok": False, "notes": [f"the sandbox launcher failed (status {code_}{', ' + why if why else ''})"]}
    return {"ok": True, **applied, "measured": result}


def main(argv: list[str]) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="specir.search.sandbox")
    parser.add_argument("--folder", required=True)
    parser.add_argument("--memory", type=int, default=8 << 30)
    parser.add_argument("--no-address-space", action="store_true")
    parser.add_argument("--setenv", action="append", default=[])
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    die_with_parent()  # the sandbox ends with the worker that started it (the exec below keeps this)
    folder = Path(args.folder).resolve()
    applied = restrict(folder, Limits(memory_bytes=args.memory, address_space=not args.no_address_space))
    if not applied.pid_namespace:
        applied.notes.append("no PID namespace: processes the code detaches from its session may outlive it")
    (folder / "applied.json").write_text(json.dumps(applied.as_dict()))
    os.environ["SPECIR_SANDBOXED"] = "1"
    for item in args.setenv:
        key, _, value = item.partition("=")
        os.environ[key] = value
    if applied.pid_namespace:
        # the first child is the namespace's init: when it ends, the kernel kills everything inside;
        # it dies with this launcher (PDEATHSIG), so killing the launcher's group ends the sandbox
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status) & 0xFF
        die_with_parent()  # (no parent pid to check: inside the new namespace getppid() is 0)
    os.execv(command[0], command)
    return 127  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
