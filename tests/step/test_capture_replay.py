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
