"""The host CPU as a TVM target: LLVM's name for the CPU plus the SIMD features the OS reports.

`mcpu` alone is not enough inside a VM: a hypervisor may hide features that the CPU model
implies (e.g. AVX-512 on a Zen 4 guest), and code built for them would die with SIGILL. So the
features that matter to these kernels are read from /proc/cpuinfo and passed explicitly as
`+feat` / `-feat` in `mattr`. The vector width the schedules use follows from them.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

# LLVM feature name -> /proc/cpuinfo flag name (x86). Only features a kernel here can use.
_X86_FEATURES = {
    "sse4.2": "sse4_2",
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "f16c": "f16c",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512vl": "avx512vl",
    "avx512dq": "avx512dq",
    "avx512bf16": "avx512_bf16",
    "avx512vnni": "avx512_vnni",
    "avxvnni": "avx_vnni",
}


@dataclass(frozen=True)
class HostCPU:
    """What the kernels need to know about the machine they run on."""

    mcpu: str
    triple: str
    features: tuple[str, ...]  # LLVM names of the SIMD features present
    cores: int

    @property
    def fp32_lanes(self) -> int:
        """fp32 lanes of the widest vector register the schedules target."""
        if "avx512f" in self.features:
            return 16
        if "avx" in self.features or "avx2" in self.features:
            return 8
        return 4  # SSE / NEON

    def target_dict(self) -> dict:
        """The TVM target (0.27 wants flags as a dict)."""
        target = {"kind": "llvm", "mcpu": self.mcpu, "mtriple": self.triple, "num-cores": self.cores}
        if platform.machine() in ("x86_64", "AMD64"):
            target["mattr"] = [("+" if name in self.features else "-") + name for name in _X86_FEATURES]
        return target

    def target(self):
        import tvm

        return tvm.target.Target(self.target_dict())

    def key(self) -> str:
        """A short string that names this target in cache keys."""
        return f"{self.triple}/{self.mcpu}/{'+'.join(self.features)}"


PARALLEL_MIN_ELEMENTS = 1 << 16

# TVM's thread pool pins its threads (and the calling thread) to cores unless told not to: on a
# shared machine that ties a process to a core others may be using, and `set_threads(1)` would
# shrink this process's CPU affinity to one core (which `host_cpu().cores` then reports).
os.environ.setdefault("TVM_BIND_THREADS", "0")

_threads: int | None = None  # set_threads(); None: TVM's default pool, parallel variants allowed


def set_threads(threads: int | None) -> None:
    """Run kernels on `threads` threads (TVM's pool is resized to match). With one thread every
    call uses the serial variant of its kernel, so parallel variants are never compiled; None
    restores the default (TVM's pool size, parallel variants for big calls)."""
    global _threads
    if threads == _threads:
        return
    import tvm

    tvm.get_global_func("runtime.config_threadpool")(1, int(threads or 0))
    _threads = threads


def parallel_allowed() -> bool:
    """False when set_threads(1) made every kernel call serial."""
    return _threads is None or _threads > 1


def parallel_rows(rows: int, width: int) -> bool:
    """Whether a row-wise kernel call is worth a parallel launch (a few microseconds, and much
    more on a busy machine): only with two rows or more and >= 64K elements in all."""
    return parallel_allowed() and rows > 1 and rows * width >= PARALLEL_MIN_ELEMENTS


def _cpuinfo_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@functools.cache
def host_cpu() -> HostCPU:
    """Detect the host once per process."""
    from tvm.target import codegen

    mcpu = str(codegen.llvm_get_system_cpu())
    triple = str(codegen.llvm_get_system_triple())
    flags = _cpuinfo_flags()
    if platform.machine() in ("x86_64", "AMD64"):
        present = tuple(name for name, flag in _X86_FEATURES.items() if flag in flags)
    else:  # aarch64: NEON is baseline; leave the rest to mcpu
        present = ("neon",)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return HostCPU(mcpu=mcpu, triple=triple, features=present, cores=cores)
