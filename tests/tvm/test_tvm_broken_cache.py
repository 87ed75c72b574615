"""A broken cached kernel library (cut short, empty, garbage, or changed since compiled) is found
before it is loaded, compiled again and replaced in the cache; it never faults the process.
(A truncated .so used to SIGBUS on every rerun, and an empty or garbage one raised InternalError.)"""
import subprocess
import sys

import pytest
import torch

from specir.backends.tvm import kernel_cache
from specir.backends.tvm.kernels import CPUKernels
from specir.backends.tvm.library_check import library_problem
from specir.backends.tvm.reference import rms_norm_reference


_COMPILE = """
import sys, torch
from specir.backends.tvm.kernels import CPUKernels
torch.manual_seed(0)
CPUKernels(sys.argv[1]).rms_norm(torch.randn(2, 64), torch.ones(64), 1e-6)
"""


def _one_kernel(folder):
    """Compile one kernel into `folder` in another process (this one must not have it mapped: a
    library loaded here and then damaged in place would fault here, which is not the case tested)."""
    done = subprocess.run([sys.executable, "-c", _COMPILE, str(folder)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    torch.manual_seed(0)
    x, w = torch.randn(2, 64), torch.ones(64)
    return rms_norm_reference(x, w, 1e-6), x, w


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "flip"])
def test_broken_library_is_recompiled_and_replaced(tmp_path, capfd, damage):
    y, x, w = _one_kernel(tmp_path)
    (library,) = tmp_path.glob("*.so")
    data = library.read_bytes()
    assert library_problem(library) is None
    if damage == "truncate":
        library.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        library.write_bytes(b"")
    elif damage == "garbage":
        library.write_bytes(b"not a library" * 100)
    else:  # a flipped byte deep inside: only the recorded digest notices
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0xFF
        library.write_bytes(bytes(flipped))
    compiled = []
    remove = kernel_cache.on_compile(lambda kernel, params: compiled.append(kernel))
    try:
        capfd.readouterr()
        again = CPUKernels(tmp_path).rms_norm(x, w, 1e-6)  # a fresh cache object: loads from disk
    finally:
        remove()
    assert compiled == ["rms_norm"]
    assert "compiling it again" in capfd.readouterr().err
    torch.testing.assert_close(again, y, rtol=1e-5, atol=1e-6)
    assert library_problem(library, kernel_cache._recorded_digest(library)) is None
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left


def test_a_broken_library_in_a_build_folder_is_shadowed_not_rewritten(tmp_path):
    from specir.backends.tvm.kernel_cache import KernelCache
    build, cache = tmp_path / "build", tmp_path / "cache"
    _one_kernel(build)
    (library,) = build.glob("*.so")
    library.write_bytes(b"")
    x, w = torch.randn(2, 64), torch.ones(64)
    CPUKernels(cache=KernelCache(cache, read_dirs=[build])).rms_norm(x, w, 1e-6)
    assert library.read_bytes() == b"" and len(list(cache.glob("*.so"))) == 1
