"""Shared fixtures for the Triton kernel tests.

Without a GPU the kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1 is set here,
before any kernel module is imported). With a GPU the same tests run the compiled kernels.
Every test draws fresh random inputs; the seed is printed (shown by pytest on failure) and can
be pinned with SPECIR_TEST_SEED=<n>.
"""

import os
import secrets
import sys
import types

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _make_specir_importable():
    """Run from a plain checkout too (e.g. on a GPU box without `pip install -e .`)."""
    try:
        import specir.backends.triton.kernels  # noqa: F401
        return
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, root)
    import specir
    specir.__path__.append(root)


_make_specir_importable()

# relative-error bounds per activation dtype (see `close`)
# bf16: an element is rounded once in the kernel and once in the reference, and sums in another order:
# up to about four bf16 ulps (2^-8 each) of relative error on the largest elements
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


@pytest.fixture
def seed():
    value = int(os.environ.get("SPECIR_TEST_SEED", secrets.randbits(31)))
    print(f"seed={value} (rerun with SPECIR_TEST_SEED={value})")
    torch.manual_seed(value)
    return value


@pytest.fixture
def device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def poisoned(shape, dtype, device):
    """A tensor whose every element is invalid (NaN, or -7777 for integers), to catch unwritten outputs."""
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, -7777, dtype=dtype, device=device)


def close(actual, expected, dtype=None, tol=None):
    """Assert every element is finite and |a - e| <= tol * (|e| + rms(e))."""
    tol = TOLERANCE[dtype or expected.dtype] if tol is None else tol
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    a, e = actual.float().cpu(), expected.float().cpu()
    assert torch.isfinite(a).all(), f"{(~torch.isfinite(a)).sum().item()} non-finite (unwritten?) elements"
    scale = e.pow(2).mean().sqrt().item() + 1e-30
    err = ((a - e).abs() / (e.abs() + scale)).max().item()
    assert err <= tol, f"relative error {err:.3g} > {tol:.1g}"


@pytest.fixture
def kt():
    """Test helpers: kt.poisoned(shape, dtype, device), kt.close(actual, expected, dtype=None, tol=None)."""
    return types.SimpleNamespace(poisoned=poisoned, close=close)
