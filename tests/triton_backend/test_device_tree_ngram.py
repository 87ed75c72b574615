"""Static-tree (EAGLE-2-style expansion on the device, tree mask, KV compaction) and n-gram
(host lookup, device verify) pipelines on the Triton backend pass token forcing at batch 1 and 2."""
from __future__ import annotations

import pytest

from tests.triton_backend.pipelines import PROMPTS, forced, pipeline


@pytest.mark.parametrize("kind", ["tree", "ngram"])
def test_device_schedule_is_lossless(kind, tiny_pair):
    from specir.backends.triton.lowering import make_engine
    target, drafter = tiny_pair
    p = pipeline(kind, target, drafter)
    engine = make_engine(p, "cpu")
    assert engine.schedule.kind == kind
    for batch in (1, 2):
        prompts = PROMPTS[:batch]
        results = engine.generate(prompts, 5)
        assert engine.last_path == "device"
        assert all(len(r.tokens) == 5 == sum(r.accept_lengths) for r in results)
        report = forced(p, target, prompts, [r.tokens for r in results])
        assert report.checked == 5 * batch and report.mismatches == 0, report.as_dict()
        if kind == "tree":
            assert max(max(r.accept_lengths) for r in results) > 1, "no drafted node was ever accepted"
