"""Shared fixtures for the Triton kernel tests.

Without a GPU the kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1 is set here,
before any kernel module is imported). With a GPU the same tests run the compiled kernels.
Every test draws fresh random inputs; the seed is printed (shown by pytest on failure) and can
be pinned with SPECIR_TEST_SEED=<n>.
"""

import os
import sys
import types

import pytest
import torch

from tests.helpers.tolerance import close

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

@pytest.fixture
def device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def poisoned(shape, dtype, device):
    """A tensor whose every element is invalid (NaN, or -7777 for integers), to catch unwritten outputs."""
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, -7777, dtype=dtype, device=device)


@pytest.fixture
def kt():
    """Test helpers: kt.poisoned(shape, dtype, device), kt.close(actual, expected, dtype=None, tol=None)."""
    return types.SimpleNamespace(poisoned=poisoned, close=close)
