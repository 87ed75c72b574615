"""The disk cache: a second process compiles nothing; keys separate what must differ; the
package imports without tvm."""

import json
import subprocess
import sys

import torch

_WORK = r"""
import torch
def work(kernels):
    torch.manual_seed(0)
    x, w = torch.randn(3, 64), torch.randn(32, 64).bfloat16()
    y = kernels.linear(x, w)
    y1 = kernels.linear(x[:1], w)  # GEMV tile: a second kernel
    h = kernels.rms_norm(x, torch.ones(64), 1e-6)
    return float(y.sum() + y1.sum() + h.sum())
"""

_SCRIPT = _WORK + r"""
import json, sys
from specir.backends.tvm import kernel_cache
from specir.backends.tvm.kernels import CPUKernels
compiled = []
kernel_cache.on_compile(lambda kernel, params: compiled.append(kernel))
checksum = work(CPUKernels(sys.argv[1]))
print(json.dumps({"compiled": compiled, "count": kernel_cache.compile_count(), "checksum": checksum}))
"""


def test_second_process_compiles_nothing(tmp_path):
    """Compile here, then a new process (a fresh interpreter: no memory of this one) loads."""
    from specir.backends.tvm import kernel_cache
    from specir.backends.tvm.kernels import CPUKernels

    compiled = []
    remove = kernel_cache.on_compile(lambda kernel, params: compiled.append(kernel))
    try:
        scope = {}
        exec(_WORK, scope)
        checksum = scope["work"](CPUKernels(tmp_path))
    finally:
        remove()
    assert sorted(compiled) == ["linear", "linear", "rms_norm"]
    assert len(list(tmp_path.glob("*.so"))) == 3
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    second = json.loads(done.stdout.strip().splitlines()[-1])
    assert second["compiled"] == [] and second["count"] == 0
    assert second["checksum"] == checksum


def test_fresh_cache_object_loads_from_disk(tmp_path):
    from specir.backends.tvm import kernel_cache
    from specir.backends.tvm.kernels import CPUKernels

    x, g = torch.randn(2, 64), torch.randn(2, 64)
    y1 = CPUKernels(tmp_path).silu_mul(x, g)
    before = kernel_cache.compile_count()
    y2 = CPUKernels(tmp_path).silu_mul(x, g)
    assert kernel_cache.compile_count() == before
    assert torch.equal(y1, y2)


def test_keys_separate_static_parameters(tmp_path):
    from specir.backends.tvm.kernel_cache import KernelCache

    cache = KernelCache(tmp_path)
    base = {"n": 32, "k": 64, "act": "float32"}
    name, _ = cache.key("linear", base)
    assert cache.key("linear", dict(base))[0] == name
    assert cache.key("linear", {**base, "n": 33})[0] != name
    assert cache.key("linear", {**base, "act": "bfloat16"})[0] != name
    assert cache.key("rms_norm", base)[0] != name


def test_importing_the_package_does_not_import_tvm():
    code = "import sys, specir, specir.backends.tvm; print('tvm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_host_target_matches_cpuinfo():
    from specir.backends.tvm.host_target import _cpuinfo_flags, host_cpu

    host = host_cpu()
    flags = _cpuinfo_flags()
    target = host.target_dict()
    assert target["kind"] == "llvm" and target["mcpu"]
    if "avx2" in flags:
        assert "+avx2" in target["mattr"] and host.fp32_lanes >= 8
    if "avx512f" not in flags and "mattr" in target:
        assert "-avx512f" in target["mattr"]
