"""Fixtures for the TVM backend (op table, lowering, pipelines). The compiled-kernel cache is the
test run's (tests/conftest.py points SPECIR_CACHE at one folder for every worker), so each
kernel compiles once per run. Every op test draws fresh random inputs; the seed is printed and
can be pinned with SPECIR_TEST_SEED=<n>."""
from __future__ import annotations

import os
import secrets

import pytest
import torch

pytest.importorskip("tvm")


@pytest.fixture(scope="session")
def tvm_ops():
    """The TVM op table (op name -> fn(params, state, *inputs)) over the run's kernel cache."""
    from specir.backends.tvm.kernel_cache import KernelCache
    from specir.backends.tvm.kernels import CPUKernels
    from specir.backends.tvm.op_table import kernel_table
    return kernel_table(CPUKernels(cache=KernelCache()))


@pytest.fixture
def fresh_seed():
    seed = int(os.environ.get("SPECIR_TEST_SEED", secrets.randbelow(2**31)))
    torch.manual_seed(seed)
    print(f"SPECIR_TEST_SEED={seed}")
    return seed
