"""Shared fixtures for the TVM CPU kernel tests.

One kernel cache folder per test session, so tests that reuse a shape compile it once. Every
test draws fresh random inputs; the seed is printed (pytest shows it on failure) and can be
pinned with SPECIR_TEST_SEED=<n>.
"""

import os
import secrets

import pytest
import torch

pytest.importorskip("tvm")


@pytest.fixture(scope="session")
def kernels(tmp_path_factory):
    from specir.backends.tvm.kernels import CPUKernels

    return CPUKernels(tmp_path_factory.mktemp("tvm-kernels"))


@pytest.fixture(autouse=True)
def fresh_seed():
    seed = int(os.environ.get("SPECIR_TEST_SEED", secrets.randbelow(2**31)))
    torch.manual_seed(seed)
    print(f"SPECIR_TEST_SEED={seed}")
    return seed


def assert_close_scaled(actual, expected, rtol=1e-5):
    """|actual - expected| <= rtol * max|expected| elementwise (dot products: the error of a
    reordered fp32 sum scales with the magnitudes summed, not with each output)."""
    actual, expected = actual.float(), expected.float()
    scale = expected.abs().max().clamp_min(1e-30)
    err = (actual - expected).abs().max()
    assert err <= rtol * scale, f"max abs error {err:.3e} > {rtol:g} * {scale:.3e}"
