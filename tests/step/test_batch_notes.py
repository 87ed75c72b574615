"""The compile note for batched decoding: where the cost model prices the step below plain decoding
at a batch size, `specir compile` says so, and names the option that turns speculation down when
each request verifies its whole draft there."""
from __future__ import annotations

from dataclasses import replace

import pytest

from specir.batch_schedule import predicted_speedup, verifies_whole_draft
from specir.cli.cmd_init import pipeline_text
from specir.compiler import batch_notes
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from specir.targets import get_target
from tests.helpers.bench_scripts import load_bench_script


@pytest.fixture(scope="module")
def zoo_pair():
    return load_pipeline("<zoo>", text=pipeline_text("zoo", "zoo:code-target", "zoo:code-drafter", 4))


@pytest.fixture(scope="module")
def shaped_8b(zoo_pair):
    """The zoo pair at the 8B shape (configs alone: what the cost model prices)."""
    script = load_bench_script("two_level_predict")
    models = tuple(replace(script.shaped_model(m.name, "llama-3.1-8b" if m.name == "target" else "llama-1b-width-3l",
                                               str(m.attrs["source"])), attrs=m.attrs) for m in zoo_pair.models)
    return replace(zoo_pair, models=models)


def _run(pipeline, passes):
    return PassManager(build_passes(passes)).run(pipeline)


def test_a_whole_tree_at_large_batches_gets_the_shrink_hint(shaped_8b):
    """At the 8B shape on the H200 the default tree, verified whole (shrink=false), prices below AR
    from batch 32 (measured in session 11: 1.01x at 32, 0.58x at 64); batch-fusion's default shrink
    table keeps every size at or above plain decoding."""
    h200 = get_target("h200")
    whole = _run(shaped_8b, "tree-verify,batch-fusion{shrink=false}")
    notes = batch_notes(whole, h200)
    assert len(notes) == 1 and "batch 32" in notes[0] and "64 (" in notes[0] and "batch 1 " not in notes[0], notes
    assert "give batch-fusion shrink=true,target=h200 to draft less" in notes[0]
    assert predicted_speedup(whole, h200, 1) > 1.0 > predicted_speedup(whole, h200, 64)
    default = _run(shaped_8b, "tree-verify,batch-fusion")
    assert batch_notes(default, h200) == []
    assert all(predicted_speedup(default, h200, b) >= 1.0 for b in (1, 8, 32, 64))
    assert not verifies_whole_draft(default, 64) and verifies_whole_draft(whole, 64)


def test_the_hint_names_the_compile_target_and_the_missing_pass(zoo_pair):
    """The shipped pair's tree on the CPU (measured 0.76x at batch 1, bench/results/cpu_pipelines.md):
    without batch-fusion the hint adds it, priced for the CPU; with it, the shrink table drafts at no
    batch size (the CPU's per-op cost: the chain measured 0.79x at batch 1,
    bench/results/cpu-step-fit-2026-12-03) and the note says the build decodes as AR does."""
    cpu = get_target("cpu")
    (note,) = batch_notes(_run(zoo_pair, "tree-verify"), cpu)
    assert "batch 1 (" in note and "add batch-fusion (its shrink table" in note, note
    for passes in ("tree-verify,batch-fusion{target=cpu}", "batch-fusion{target=cpu}"):
        (note,) = batch_notes(_run(zoo_pair, passes), cpu)
        assert "off from 1 live request" in note and "decodes as its AR pipeline does" in note, note
    assert batch_notes(_run(zoo_pair, "ngram-draft,batch-fusion{target=cpu}"), cpu) == []


def test_a_recurrent_target_gets_no_batch_fusion_hint():
    """batch-fusion refuses recurrent targets, so the note on a hybrid pair never suggests it."""
    hybrid = load_pipeline("<zoo>", text=pipeline_text("zoo", "zoo:code-hybrid-target", "zoo:code-drafter", 4))
    for passes in ("", "tree-verify"):
        p = _run(hybrid, passes) if passes else hybrid
        notes = batch_notes(p, get_target("h200"))
        assert notes and all("batch-fusion" not in note for note in notes), (passes, notes)  # slow from batch 8
        assert all("batch-fusion" not in note for note in batch_notes(p, get_target("cpu"))), passes


def _budget(pipeline):
    return next(op for op in pipeline.step.ops if op.name == "batch.budget")


def _with_tokens(pipeline, tokens):
    """`pipeline` with its batch.budget's table set to `tokens`, its draft ops untouched."""
    ops = tuple(replace(op, attrs=op.attrs.set(tokens=tuple(tokens))) if op.name == "batch.budget" else op
                for op in pipeline.step.ops)
    return replace(pipeline, step=replace(pipeline.step, ops=ops))


def test_a_draft_that_cannot_stop_is_priced_running(zoo_pair):
    """draft.cascade (two-level-verify) declares no off_at: a step verifying none of its tokens still
    runs the drafter and the mid level, so the shrink table never prices "draft nothing" as plain AR
    there, and the predicted speedup of a zero budget is below 1; a chain whose off_at is reached
    prices 1.0."""
    from specir.batch_schedule import drafting_can_stop
    cpu = get_target("cpu")
    cascade = _run(zoo_pair, "two-level-verify,batch-fusion{target=cpu}")
    assert not drafting_can_stop(cascade)
    assert all(t > 0 for t in _budget(cascade).attrs["tokens"]), _budget(cascade)
    assert predicted_speedup(_with_tokens(cascade, [0]), cpu, 8) < 1.0
    chain = _run(zoo_pair, "batch-fusion{target=cpu,alpha=0.95}")  # a pair accepting enough to draft at 1-4
    assert drafting_can_stop(chain)
    stopped = _with_tokens(chain, [0])
    stopped = replace(stopped, step=replace(stopped.step, ops=tuple(
        replace(op, attrs=op.attrs.set(off_at=1)) if op.name == "draft.chain" else op for op in stopped.step.ops)))
    assert predicted_speedup(stopped, cpu, 8) == 1.0
    off_at = next(op for op in chain.step.ops if op.name == "draft.chain").attrs["off_at"]
    assert off_at > 2
    running = _with_tokens(chain, [0])  # a zero budget below off_at: the drafter still runs
    assert predicted_speedup(running, cpu, 2) < 1.0 == predicted_speedup(running, cpu, off_at)
