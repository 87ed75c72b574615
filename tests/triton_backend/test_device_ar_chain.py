"""AR and chain pipelines run by the Triton backend's step (CUDA graphs on a GPU; eager in
Triton's interpreter here) pass token forcing at batch 1 and 2. AR runs with
bf16 activations (the GPU's dtype), the others with f32 (cheaper in the interpreter)."""
from __future__ import annotations

import pytest

from tests.triton_backend.pipelines import assert_device_step_lossless


@pytest.mark.parametrize("kind", ["ar", "chain"])
def test_device_step_is_lossless(kind, tiny_pair):
    assert_device_step_lossless(kind, *tiny_pair, dtype="bf16" if kind == "ar" else "f32")
