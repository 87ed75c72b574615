"""Prefill shapes (specir/step/prefill_shapes.py): on a backend that captures, prompt batches run in
a fixed set of (rows, tokens) forwards, so the serving warm-up can capture them all; pad rows and
chunked long prompts leave every output token as an eager prefill gives it."""
from __future__ import annotations

import random

import pytest

from specir.load import load_pipeline
from specir.step import prefill_shapes
from specir.step.engine import StepEngine
from tests.helpers.specs import write_spec
from tests.step.test_capture_replay import EmulatedGraphs


@pytest.mark.parametrize("capacity", [1, 3, 8, 32])
def test_every_bucketed_prefill_takes_a_listed_shape(capacity):
    listed = set(prefill_shapes.shapes(capacity, 4352))
    for n in range(1, capacity + 1):
        rows = prefill_shapes.rows(n, capacity)
        assert n <= rows <= capacity and (rows & (rows - 1) == 0 or rows == capacity)
        for longest in (1, 31, 33, 200, 511, 513, 1500, 4000):
            plan = prefill_shapes.chunks(longest, rows_=rows, max_seq=4352, bucketed=True)
            assert plan[0][0] == 0 and plan[-1][0] + plan[-1][1] >= longest  # every token, in order
            assert all(b + s == nb for (b, s), (nb, _) in zip(plan, plan[1:]))
            assert all((rows, s) in listed and rows * s <= max(prefill_shapes.TOKENS_PER_FORWARD, rows * 32)
                       for _, s in plan)


def test_unbucketed_prefills_keep_the_quantum_and_the_ring_limit():
    assert prefill_shapes.chunks(100, rows_=3, max_seq=512, bucketed=False, quantum=32) == [(0, 128)]
    assert prefill_shapes.chunks(100, rows_=3, max_seq=512, bucketed=False, quantum=32, limit=48) == \
        [(0, 48), (48, 48), (96, 32)]
    assert prefill_shapes.chunks(0, rows_=1, max_seq=512, bucketed=True) == []
    assert prefill_shapes.chunks(300, rows_=1, max_seq=320, bucketed=True) == [(0, 320)]  # within the cache


def test_padded_and_chunked_prefills_equal_eager_ones(pair, tmp_path):
    """Five requests (eight rows: three pad rows repeating row 0) with prompts past a forward's chunk
    (rows x tokens <= TOKENS_PER_FORWARD: a 400-token prompt in 8 rows takes two chunks)."""
    from specir.backends.reference.step_backend import TableStepBackend
    target, drafter = pair
    pipeline = load_pipeline(write_spec(tmp_path, "chain", target, drafter, k=3))
    rng = random.Random(5)
    prompts = [[rng.randrange(1, 250) for _ in range(n)] for n in (400, 37, 129, 5, 260)]
    graphs = EmulatedGraphs(TableStepBackend("cpu"))
    got = StepEngine(pipeline, graphs).generate(prompts, 12)
    want = StepEngine(pipeline, TableStepBackend("cpu")).generate(prompts, 12)
    assert [r.tokens for r in got] == [r.tokens for r in want]
    assert prefill_shapes.chunks(399, rows_=8, max_seq=1024, bucketed=True) == [(0, 256), (256, 192)]


def test_pad_rows_leave_a_live_request_alone(pair, tmp_path):
    """Requests joining a live one are prefilled with pad rows (5 joiners -> 8 rows); the pad rows
    rewrite the first joiner's rows only, so the live request in slot 0 decodes on unchanged."""
    from specir.backends.reference.step_backend import TableStepBackend
    target, drafter = pair
    pipeline = load_pipeline(write_spec(tmp_path, "chain", target, drafter, k=3))
    rng = random.Random(8)
    live = [rng.randrange(1, 250) for _ in range(50)]
    joiners = [[rng.randrange(1, 250) for _ in range(n)] for n in (90, 7, 33, 64, 12)]
    outputs = []
    for backend in (EmulatedGraphs(TableStepBackend("cpu")), TableStepBackend("cpu")):
        engine = StepEngine(pipeline, backend)
        decode = engine.open(8, engine.rows_needed(100, 30), sampling=False)
        first = decode.add(live, 30)
        decode.step()
        decode.step()
        later = [decode.add_many([(p, 12, 0.0, 1) for p in joiners])]
        while decode.active():
            decode.step()
        outputs.append([first.generated] + [r.generated for r in later[0]])
    assert outputs[0] == outputs[1]


def test_a_model_whose_forwards_run_eagerly_prefills_each_prompt_in_one_forward(pair, tmp_path):
    """On a capturing backend, a model whose forwards are not captured (a length-dependent rope
    reads the prompt's length on the host) is not bucketed: its prompts run as they are, in one
    forward (chunks would each see their own length), with no pad rows."""
    from specir.backends.reference.step_backend import TableStepBackend
    target, drafter = pair
    pipeline = load_pipeline(write_spec(tmp_path, "chain", target, drafter, k=3))
    engine = StepEngine(pipeline, EmulatedGraphs(TableStepBackend("cpu")))
    engine.executors["target"].static = False  # as a dynamic / longrope table makes it
    rng = random.Random(2)
    prompts = [[rng.randrange(1, 250) for _ in range(n)] for n in (401, 9, 30)]
    got = [r.tokens for r in engine.generate(prompts, 6)]
    shapes = {key[1:] for key in engine.sessions[(3, False)].prefills if key[0] == "target"}
    assert shapes == {("verify", 3, 400)}  # 3 rows, the longest feed padded to the quantum (4)
    want = StepEngine(pipeline, TableStepBackend("cpu")).generate(prompts, 6)
    assert got == [r.tokens for r in want]
