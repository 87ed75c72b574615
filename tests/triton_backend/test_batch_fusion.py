"""batch-fusion on the Triton backend (the interpreter on a CPU): the packed verify (one forward of
one-token rows, per-row slot, lens, offset and mask row) gives plain decoding's tokens; the packed
verify runs on the host between device segments (its size is data)."""
from __future__ import annotations

from specir.pass_infra import PassManager, build_passes
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


def test_drafting_off_and_resync_on_the_triton_backend(tiny_pair, device):
    """draft.tree {off_at = 2} on the Triton backend: two live requests decode autoregressively (no
    drafter forward), the one left resyncs its drafter and speculates; every token forced."""
    target, drafter = tiny_pair
    p = PassManager(build_passes("batch-fusion")).run(pipeline("tree", target, drafter))
    from specir.ir.parser import parse
    from specir.ir.printer import print_pipeline
    p = parse(print_pipeline(p).replace("topk = 2}", "off_at = 2, topk = 2}"))
    engine = make_engine(p, "triton", device, None)
    decode = engine.open(2, engine.rows_needed(8, 6), sampling=False)
    short, long_ = decode.add(PROMPTS[1], 2), decode.add(PROMPTS[0], 6)
    while decode.active():
        decode.step()
    assert short.accept_lengths == [1, 1] and max(long_.accept_lengths[2:]) > 1
    report = forced(p, target, [short.prompt, long_.prompt], [short.generated, long_.generated])
    assert report.checked == 8 and report.mismatches == 0, report.as_dict()
