"""bench/host_ops.py's counter on the zoo pair at batch 2: it counts the ATen ops and the nonzero sync of
batch-fusion's host segment (verify.packed) apart from the forward it launches, finds no host segment
in the plain chain, and observing a step (StepProgram.observer, the launch wrapper, the dispatch
modes) leaves the emitted tokens as they are."""
from __future__ import annotations

import contextlib

from specir.runtime.session import make_engine
from tests.helpers.bench_scripts import load_bench_script


def test_counter_counts_host_segment_ops_and_keeps_tokens():
    mod = load_bench_script("host_ops")
    prompts = mod.zoo_prompts(2, 16)
    for name, pipeline in mod.zoo_pipelines(["chain", "chain-bf"]).items():
        engine = make_engine(pipeline, "reference", "cpu", None)
        r = mod.measure(engine, prompts, warm=1, steps=1, max_new=16)
        host = [s for s in r["segments"] if s["host"]]
        if name == "chain-bf":
            assert [s["ops"] for s in host] == [["verify.packed"]]
            assert r["host_ops"] > 0 and host[0]["sync_kinds"].get("nonzero") == 1  # ragged.pack's host read
            assert host[0]["forward_ops"] > 100  # the packed forward, counted apart from the host ops
            assert host[0]["aten_ops"] < host[0]["forward_ops"]
        else:
            assert host == [] and r["host_ops"] == 0
        assert r["device_ops"] > 0 and r["outside"]["sync_kinds"].get("cpu") == 1  # the engine's readback
        assert r["tokens"] == mod.decode_tokens(engine, prompts, 3, max_new=16), name  # warm + counted + timed
        assert engine.program.observer is None


def test_observer_is_entered_around_each_segment_in_order():
    mod = load_bench_script("host_ops")
    pipeline = mod.zoo_pipelines(["chain-bf"])["chain-bf"]
    engine = make_engine(pipeline, "reference", "cpu", None)
    seen = []

    @contextlib.contextmanager
    def observer(index, segment):
        seen.append(("enter", index, segment.host))
        yield
        seen.append(("exit", index, segment.host))

    decode = mod.open_decode(engine, mod.zoo_prompts(2, 16), 16)
    engine.program.observer = observer
    try:
        decode.step()
    finally:
        engine.program.observer = None
    assert seen == [(edge, i, host) for i, host in enumerate([False, True, False]) for edge in ("enter", "exit")]
