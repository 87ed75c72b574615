"""Calibration of the cost model by microbenchmarks of this machine (`specir calibrate --target T`).

Contract: `calibration(target)` returns the `Calibration` cached for this machine and target
(`<user cache>/calibration/<machine>-<target>.json`, versioned by `VERSION`: a cache written by
another version, or for another machine, is measured again); `measure(target)` runs the
microbenchmarks: copy bandwidth (a large tensor copy, read + write counted: `gpu_copy_bandwidth` on a GPU), dense matmul rate
(bf16 on a GPU, f32 on a CPU, one thread as the engine decodes), and the cost of one small op (a
1-row linear of width 256, the launch/dispatch floor every op of a forward pays). Without a
calibration the cost model uses the target's datasheet numbers and its fitted per-op cost
(`step_op_seconds`, 0 where none).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .targets import Target
from .user_cache import cache_root

VERSION = 2  # 2: the GPU copy bandwidth from a 1 GiB copy timed by CUDA events


@dataclass(frozen=True)
class Calibration:
    target: str
    machine: str
    bandwidth: float  # bytes/s
    flops: float  # FLOP/s
    op_seconds: float  # one small op's fixed cost
    version: int = VERSION
    measured: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_target(cls, target: Target) -> "Calibration":
        """The datasheet numbers and the target's fitted per-op cost (no microbenchmark ran)."""
        return cls(target.name, "datasheet", target.device_bandwidth, target.device_flops, target.step_op_seconds,
                   VERSION, "")


def machine_id() -> str:
    """This machine: host name, CPU model and core count, and the GPU names."""
    parts = [platform.node(), platform.machine(), str(os.cpu_count())]
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                parts.append(line.split(":", 1)[1].strip())
                break
    except OSError:
        pass
    try:
        import torch
        if torch.cuda.is_available():
            parts += [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:
        pass
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def cache_file(target_name: str) -> Path:
    return cache_root() / "calibration" / f"{machine_id()}-{target_name}.json"


def _best_of(fn, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


GPU_COPY_BYTES = 1 << 30   # per buffer: a 256 MB copy timed on the host read 7 % under gpu_bench's (H100, session 33)


def _copy_bandwidth(torch, device: str, gpu: bool) -> float:
    """Bytes read + written per second by a tensor copy: on a GPU `gpu_copy_bandwidth` of 1 GiB (less where
    memory is short), on a CPU 16 MiB timed on the host (best of 5)."""
    if gpu:
        return gpu_copy_bandwidth(max(1 << 24, min(GPU_COPY_BYTES, torch.cuda.mem_get_info()[0] // 8)))
    n = 1 << 24
    src = torch.empty(n // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    return 2 * n / _best_of(lambda: dst.copy_(src))


def gpu_copy_bandwidth(nbytes: int, repeats: int = 10) -> float:
    """Bytes read + written per second by a copy of `nbytes` on the current GPU, timed by CUDA events (the
    median of `repeats` after three warm-ups); the buffers go back to the device afterwards."""
    import torch
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    nbytes = 2 * src.numel() * src.element_size()
    del src, dst
    torch.cuda.empty_cache()
    return nbytes / sorted(times)[len(times) // 2]


def measure(target: Target) -> Calibration:
    import torch
    gpu = target.kind == "gpu" and torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    threads = torch.get_num_threads()
    if not gpu:
        torch.set_num_threads(1)
    try:
        sync = torch.cuda.synchronize if gpu else (lambda: None)
        bandwidth = _copy_bandwidth(torch, device, gpu)
        size, dtype = (8192, torch.bfloat16) if gpu else (512, torch.float32)
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        (a @ b)
        sync()
        mm = _best_of(lambda: ((a @ b), sync()))
        flops = 2 * size ** 3 / mm
        x = torch.randn(1, 256, device=device, dtype=dtype)
        w = torch.randn(256, 256, device=device, dtype=dtype)
        calls = 200

        def small():
            for _ in range(calls):
                torch.nn.functional.linear(x, w)
            sync()
        small()
        op = _best_of(small) / calls
    finally:
        torch.set_num_threads(threads)
    return Calibration(target.name, machine_id(), bandwidth, flops, op, VERSION,
                       time.strftime("%Y-%m-%dT%H:%M:%S"))


def load(target: Target) -> Calibration | None:
    """The cached calibration of this machine for `target`, or None (missing, other version)."""
    path = cache_file(target.name)
    try:
        data = json.loads(path.read_text())
        cal = Calibration(**data)
    except (OSError, ValueError, TypeError):
        return None
    return cal if cal.version == VERSION and cal.machine == machine_id() and cal.target == target.name else None


def save(cal: Calibration) -> Path:
    """Write `cal` to its cache file atomically (a private temporary file, then a rename: runs that
    calibrate at once each leave a whole file)."""
    path = cache_file(cal.target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(cal.as_dict(), indent=2) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def calibration(target: Target, *, run: bool = True) -> Calibration:
    """Cached, else measured and cached (`run`; a cache that cannot be written keeps the measured
    numbers for this call), else the datasheet numbers."""
    cal = load(target)
    if cal is None and run:
        cal = measure(target)
        try:
            save(cal)
        except OSError:
            pass
    return cal or Calibration.from_target(target)
