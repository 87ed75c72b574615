"""The capture/replay logic of the step program (program.py), checked on the CPU with a backend that
emulates CUDA graphs faithfully enough to catch wiring mistakes: capturing executes nothing, and a
replay re-executes the recorded segment writing into the tensors its capture produced (as a graph
replay writes into the same addresses). Outputs must equal the eager backend's token for token,
for every step shape (device-only steps, n-gram's host op between segments, trees, sampling)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from specir.load import load_pipeline
from specir.step.engine import StepEngine
from tests.helpers.specs import write_spec


def _copy_into(dst, src):
    if isinstance(dst, torch.Tensor):
        if 0 in dst.stride() and dst.numel() > 1:  # an expanded constant: a replay recomputes the same values
            assert torch.equal(dst, src)
        else:
            dst.copy_(src)
    elif dataclasses.is_dataclass(dst):
        for f in dataclasses.fields(dst):
            _copy_into(getattr(dst, f.name), getattr(src, f.name))


class EmulatedGraphs:
    """Wraps a non-capturing StepBackend and emulates CUDA graphs (see `capture`)."""

    def __init__(self, inner):
        self.inner, self.captures, self.name, self.device = inner, True, inner.name, inner.device
        self.prefill_quantum, self.captured, self.replays = 4, 0, 0
        self.pads_packed_rows = True  # as a capturing backend: packed forwards rounded to few sizes

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def graph_pool(self):
        return None

    def warm(self, fn):
        return fn()

    def capture(self, fn, pool):
        """Recording executes once here (standing in for the replay that follows every capture), so
        the first replay does nothing; later replays execute again into the recorded outputs."""
        self.captured += 1
        outputs = fn()
        first = [True]

        def replay():
            self.replays += 1
            if first[0]:
                first[0] = False
                return
            again = fn()
            if isinstance(outputs, dict):  # a segment's outputs by value name
                for key, value in again.items():
                    _copy_into(outputs[key], value)
            else:  # one forward's output (StepContext.launch)
                _copy_into(outputs, again)
        return replay, outputs


PIPELINES = {"chain": dict(k=3), "tree": dict(k=3, passes="tree-verify{budget=6,topk=2}"),
             "dynamic": dict(k=3, passes="tree-verify{budget=6,topk=2,expand=dynamic,threshold=0.05}"),
             "ngram": dict(k=3)}


@pytest.mark.parametrize("kind", sorted(PIPELINES))
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_replayed_steps_equal_eager_steps(kind, temperature, pair, tmp_path):
    from specir.backends.reference.step_backend import TableStepBackend
    target, drafter = pair
    spec = write_spec(tmp_path, kind, target, "ngram" if kind == "ngram" else drafter, **PIPELINES[kind])
    pipeline = load_pipeline(spec)
    prompts = [[1, 2, 3, 1, 2, 3, 1], [9, 8, 7], [4, 4, 5, 4, 4]]
    eager = StepEngine(pipeline, TableStepBackend("cpu"))
    graphs = EmulatedGraphs(TableStepBackend("cpu"))
    captured = StepEngine(pipeline, graphs)
    for _ in range(2):  # a second call reuses the session and its captures
        want = eager.generate(prompts, 10, temperature=temperature, seed=3)
        got = captured.generate(prompts, 10, temperature=temperature, seed=3)
        assert [r.tokens for r in got] == [r.tokens for r in want]
        assert [r.accept_lengths for r in got] == [r.accept_lengths for r in want]
    assert graphs.captured >= 1 and graphs.replays > graphs.captured


@pytest.mark.parametrize("kind", ["tree", "ngram"])
def test_a_program_of_one_op_per_segment_decodes_the_same(kind, pair, tmp_path):
    """StepProgram(per_op=True) (bench/step_profile.py --per-op) makes every op its own segment and
    its own capture; swapped into an engine whose whole-step captures exist, it decodes the same
    tokens, and so does the engine's own program after it is put back."""
    from specir.backends.reference.step_backend import TableStepBackend
    from specir.step.program import StepProgram
    target, drafter = pair
    spec = write_spec(tmp_path, kind, target, "ngram" if kind == "ngram" else drafter, **PIPELINES[kind])
    pipeline = load_pipeline(spec)
    prompts = [[1, 2, 3, 1, 2, 3, 1], [9, 8, 7]]
    engine = StepEngine(pipeline, EmulatedGraphs(TableStepBackend("cpu")))
    want = [r.tokens for r in engine.generate(prompts, 10)]
    own = engine.program
    per_op = StepProgram(pipeline, engine.backend, per_op=True)
    assert [d["ops"] for d in per_op.describe()] == [[op.name] for op in pipeline.step.ops]
    assert len(own.describe()) < len(pipeline.step.ops)
    engine.program = per_op
    for _ in range(2):  # eager and captured, then replayed
        assert [r.tokens for r in engine.generate(prompts, 10)] == want
    engine.program = own
    assert [r.tokens for r in engine.generate(prompts, 10)] == want


class FirstTimeCosts(EmulatedGraphs):
    """Emulated graphs whose warm-ups and captures each take 100 s of a fake clock, through the
    inner backend's `first_time` (as the Triton backend's do)."""

    def __init__(self, inner, clock):
        super().__init__(inner)
        self.clock, self.calls = clock, 0

    def _costly(self, fn):
        def run():
            self.calls += 1
            self.clock[0] += 100.0
            return fn()
        return self.inner.first_time(run)

    def warm(self, fn):
        return self._costly(fn)

    def capture(self, fn, pool):
        return self._costly(lambda: EmulatedGraphs.capture(self, fn, pool))


def test_first_time_work_counts_in_setup_not_in_decoding(pair, tmp_path, monkeypatch):
    """Kernel compilation and graph capture met inside a generate call are reported in setup_s;
    prefill_s and decode_s hold the rest (here, on a clock that only first-time work moves: 0)."""
    import types

    from specir.backends.reference.step_backend import TableStepBackend
    clock = [0.0]
    fake = types.SimpleNamespace(perf_counter=lambda: clock[0])
    monkeypatch.setattr("specir.step.engine.time", fake)
    monkeypatch.setattr("specir.step.backend.time", fake)
    target, drafter = pair
    pipeline = load_pipeline(write_spec(tmp_path, "chain", target, drafter, k=3))
    backend = FirstTimeCosts(TableStepBackend("cpu"), clock)
    engine = StepEngine(pipeline, backend)
    engine.generate([[1, 2, 3], [4, 5]], 8)
    assert backend.calls >= 2  # a warm-up and a capture at least
    assert engine.timings["decode_s"] == 0.0 and engine.timings["prefill_s"] == 0.0
    assert engine.timings["setup_s"] == pytest.approx(100.0 * backend.calls)
    calls = backend.calls
    engine.generate([[1, 2, 3], [4, 5]], 8)  # warm: replays only, nothing first-time
    assert backend.calls == calls and engine.timings["setup_s"] == pytest.approx(100.0 * calls)


def test_prefills_replay_one_graph_per_shape(pair, tmp_path):
    """A prefill is captured at the first prompt batch of its shape (requests x padded length) and
    replayed by every later one: other prompts of that shape read their own tokens (the static
    inputs are written before the replay), so outputs equal the eager backend's."""
    from specir.backends.reference.step_backend import TableStepBackend
    target, drafter = pair
    pipeline = load_pipeline(write_spec(tmp_path, "chain", target, drafter, k=3))
    eager = StepEngine(pipeline, TableStepBackend("cpu"))
    graphs = EmulatedGraphs(TableStepBackend("cpu"))
    captured = StepEngine(pipeline, graphs)
    first, other = [[1, 2, 3, 1, 2], [9, 8, 7]], [[5, 6, 7, 8, 9], [4, 4, 5]]  # one padded shape (quantum 4)
    got = [r.tokens for r in captured.generate(first, 6)]
    assert got == [r.tokens for r in eager.generate(first, 6)]
    session = captured.sessions[(2, False)]
    prefills = {key: entry for state in session.ctx.models.values() for key, entry in state.graphs.items()
                if key[0] == "prefill"}
    assert prefills and all(isinstance(entry, tuple) for entry in prefills.values())
    captures = graphs.captured
    got = [r.tokens for r in captured.generate(other, 6)]
    assert got == [r.tokens for r in eager.generate(other, 6)]
    assert graphs.captured == captures  # the same shapes: replays only
