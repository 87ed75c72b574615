"""batch-fusion on the Triton backend (the interpreter on a CPU): the packed verify (one forward of
one-token rows, per-row slot, lens, offset and mask row) gives plain decoding's tokens; the packed
verify runs on the host between device segments (its size is data)."""
from __future__ import annotations

from specir.pass_manager import PassManager
from specir.pass_pipeline import build_passes
from specir.runtime.session import make_engine
from tests.triton_backend.pipelines import PROMPTS, forced, pipeline


def test_packed_tree_verify_is_lossless_on_the_triton_backend(tiny_pair, device):
    target, drafter = tiny_pair
    p = PassManager(build_passes("batch-fusion{budget=5}")).run(pipeline("tree", target, drafter))
    engine = make_engine(p, "triton", device, None)
    assert [seg["host"] for seg in engine.program.describe()] == [False, True, False]
    prompts = PROMPTS + [[9, 8, 7, 6, 5, 4, 3, 2]]
    results = engine.generate(prompts, 5)
    assert all(len(r.tokens) == 5 for r in results)
    report = forced(p, target, prompts, [r.tokens for r in results])
    assert report.checked == 15 and report.mismatches == 0, report.as_dict()
    assert max(max(r.accept_lengths) for r in results) > 1, "no drafted token was ever accepted"
