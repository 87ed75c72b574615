"""Compile each kernel once per (kernel, static shape, dtype, schedule, target) and keep it on disk.

A kernel is named by `kernel` plus a dict of static parameters. The cache key also holds the
target, the TVM version and a digest of this package's source files, so editing any kernel
file (or upgrading TVM, or moving to another CPU) never loads a stale library. Dynamic sizes
(rows, tokens, batch, context) are symbolic inside the kernels and are not part of the key.

On disk: `<cache_dir>/<kernel>-<digest>.so` (a shared library made by `export_library`), a
`.json` next to it naming what it holds and a `.tir.py` with the scheduled TIR (TVMScript). `read_dirs` are searched first (e.g. a build folder's
`tvm/`); misses compile into `cache_dir`. A library is written to a temporary name and renamed
into place, so processes sharing a folder never see half a file. A second process with the same
folder loads the library and compiles nothing; `compile_count()` and `on_compile()` let tests
prove it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

from .library_check import file_digest, library_problem

_compile_listeners: list[Callable[[str, dict], None]] = []
_compile_count = 0
_count_lock = threading.Lock()


def compile_count() -> int:
    """Number of kernels this process has compiled (cache misses), over all caches."""
    return _compile_count


def on_compile(listener: Callable[[str, dict], None]) -> Callable[[], None]:
    """Call `listener(kernel, params)` on every compilation; returns a function that removes it."""
    _compile_listeners.append(listener)
    return lambda: _compile_listeners.remove(listener)


def default_cache_dir() -> Path:
    """$SPECIR_TVM_CACHE, else $SPECIR_CACHE/tvm, else ~/.cache/specir/tvm."""
    env = os.environ.get("SPECIR_TVM_CACHE")
    if env:
        return Path(env)
    root = os.environ.get("SPECIR_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "specir") / "tvm"


# Files of this package that generate no kernel code (the runtime glue): editing them keeps keys.
NOT_KERNEL_SOURCES = frozenset({"__init__.py", "lowering.py", "op_table.py", "kernel_plan.py", "progress.py",
                                "alignment.py", "library_check.py"})


@functools.cache
def source_digest() -> str:
    """Digest of every kernel .py file of this package: any kernel edit changes every key."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        if path.name in NOT_KERNEL_SOURCES:
            continue
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


class KernelCache:
    """Compiled kernels for one target, in memory and in `cache_dir`."""

    def __init__(self, cache_dir: str | os.PathLike | None = None, host=None, read_dirs=()):
        from .host_target import host_cpu

        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.read_dirs = [Path(d) for d in read_dirs]
        self.host = host if host is not None else host_cpu()
        self._loaded: dict[str, object] = {}  # file name -> function
        self._memo: dict[tuple, object] = {}  # frozen (kernel, params) -> function: the hot path
        self.plans: dict[tuple, object] = {}  # wrappers' memo: call signature -> what they resolved
        self._lock = threading.Lock()
        self._checked: dict[tuple, str | None] = {}  # (library, mtime, size) -> problem

    def key(self, kernel: str, params: dict) -> tuple[str, dict]:
        material = {
            "kernel": kernel,
            "params": params,
            "target": self.host.target_dict(),
            "tvm": _tvm_version(),
            "source": source_digest(),
        }
        text = json.dumps(material, sort_keys=True, default=str)
        return f"{kernel}-{hashlib.sha256(text.encode()).hexdigest()[:20]}", material

    def get(self, kernel: str, params: dict, build: Callable[[], object]):
        """The compiled function for (kernel, params). `params` is a flat dict of hashable,
        JSON-able values (str, int, float, bool, None, tuples). `build()` returns the PrimFunc;
        it is called only when neither memory nor disk holds the kernel."""
        memo_key = (kernel, tuple(params.items()))  # params: flat, hashable values
        fn = self._memo.get(memo_key)
        if fn is not None:
            return fn
        name, material = self.key(kernel, params)
        fn = self._loaded.get(name)
        if fn is not None:
            return fn
        with self._lock:
            fn = self._loaded.get(name)
            if fn is None:
                fn = self._load_or_compile(name, material, build)
                self._loaded[name] = fn
            self._memo[memo_key] = fn
        return fn

    def find(self, kernel: str, params: dict) -> Path | None:
        """The compiled library of (kernel, params) on disk, or None. A library that is not whole
        (empty, garbage, cut short, changed since compiled: library_check.py) counts as absent."""
        name, _ = self.key(kernel, params)
        for folder in (*self.read_dirs, self.cache_dir):
            path = folder / f"{name}.so"
            if path.exists() and self.problem(path) is None:
                return path
        return None

    def problem(self, library: Path) -> str | None:
        """Why `library` cannot be loaded (library_check.py), or None; memoised per file version."""
        try:
            st = library.stat()
        except OSError:
            return "missing"
        stamp = (str(library), st.st_mtime_ns, st.st_size)
        if stamp not in self._checked:
            self._checked[stamp] = library_problem(library, _recorded_digest(library))
        return self._checked[stamp]

    def _load_or_compile(self, name: str, material: dict, build: Callable[[], object]):
        """Load the library from the first folder that holds it whole; else compile it into the cache
        folder, atomically replacing a broken cache entry (a broken one in a read folder, e.g. a
        build's tvm/, is left alone and shadowed by the fresh one in the cache)."""
        import tvm

        symbol = re.sub(r"\W", "_", name)
        candidates = [d / f"{name}.so" for d in self.read_dirs] + [self.cache_dir / f"{name}.so"]
        path = next((c for c in candidates if c.exists() and self.problem(c) is None), None)
        if path is None:
            broken = next((c for c in candidates if c.exists()), None)
            if broken is not None:
                print(f"note: the TVM kernel library {broken} is {self.problem(broken)}; compiling it again",
                      file=sys.stderr)
            path = self.cache_dir / f"{name}.so"
            self._compile(path, symbol, material, build)
        try:
            return tvm.runtime.load_module(str(path))[symbol]
        except Exception as exc:  # whole by every check, yet not loadable: compile once more, then give up
            if path.parent != self.cache_dir or getattr(self, "_retried", None) == name:
                raise
            self._retried = name
            print(f"note: the TVM kernel library {path} does not load ({type(exc).__name__}); compiling it again",
                  file=sys.stderr)
            self._compile(path, symbol, material, build)
            return tvm.runtime.load_module(str(path))[symbol]

    def _compile(self, path: Path, symbol: str, material: dict, build: Callable[[], object]):
        global _compile_count
        import tvm

        func = build().with_attr("global_symbol", symbol)
        executable = tvm.compile(tvm.IRModule({symbol: func}), target=self.host.target())
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".so", dir=self.cache_dir)
        os.close(fd)
        try:
            executable.export_library(tmp)
            record = {**material, "library_sha256": file_digest(Path(tmp))}  # checked before every load
            path.with_suffix(".json").write_text(json.dumps(record, indent=1, sort_keys=True, default=str))
            path.with_suffix(".tir.py").write_text(f"# {name_of(path)}: the scheduled TIR of this kernel\n"
                                                   + func.script())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        with _count_lock:
            _compile_count += 1
        for listener in list(_compile_listeners):
            listener(material["kernel"], material["params"])


def _recorded_digest(library: Path) -> str | None:
    """The sha256 recorded next to a library when it was compiled (its .json), if any."""
    try:
        digest = json.loads(library.with_suffix(".json").read_text()).get("library_sha256")
    except (OSError, ValueError, AttributeError):
        return None
    return digest if isinstance(digest, str) else None


def name_of(library: Path) -> str:
    """`linear-<key>` for `.../linear-<key>.so`."""
    return library.name[: -len(".so")]


@functools.cache
def _tvm_version() -> str:
    import tvm

    return tvm.__version__
