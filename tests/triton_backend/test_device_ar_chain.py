"""AR and chain pipelines run by the Triton backend's device schedule (the step CUDA graphs
capture; here eager in Triton's interpreter) pass token forcing at batch 1 and 2. AR runs with
bf16 activations (the GPU's dtype), the others with f32 (cheaper in the interpreter)."""
from __future__ import annotations

import pytest

from tests.triton_backend.pipelines import PROMPTS, forced, pipeline


@pytest.mark.parametrize("kind", ["ar", "chain"])
def test_device_schedule_is_lossless(kind, tiny_pair):
    from specir.backends.triton.lowering import make_engine
    target, drafter = tiny_pair
    p = pipeline(kind, target, drafter, dtype="bf16" if kind == "ar" else "f32")
    engine = make_engine(p, "cpu")
    assert engine.schedule.kind == kind
    for batch in (1, 2):
        prompts = PROMPTS[:batch]
        results = engine.generate(prompts, 5)
        assert engine.last_path == "device"
        assert all(len(r.tokens) == 5 == sum(r.accept_lengths) for r in results)
        report = forced(p, target, prompts, [r.tokens for r in results])
        assert report.checked == 5 * batch and report.mismatches == 0, report.as_dict()
        if kind == "chain":
            assert max(max(r.accept_lengths) for r in results) > 1, "the drafter never got a token accepted"
