"""bench/host_ops.py's counter on the zoo pair at batch 2: it counts the ATen ops of the n-gram
proposer's host segment (draft.ngram reads the token history), finds no host segment and no
device->host sync in the plain chain or in batch-fusion's packed verify (device-side packing), and observing a step (StepProgram.observer, the launch wrapper, the dispatch
modes) leaves the emitted tokens as they are."""
from __future__ import annotations

import contextlib

from specir.runtime.session import make_engine
from tests.helpers.bench_scripts import load_bench_script


def test_counter_counts_host_segment_ops_and_keeps_tokens():
    mod = load_bench_script("host_ops")
    prompts = mod.zoo_prompts(2, 16)
    syncs = {}
    for name, pipeline in mod.zoo_pipelines(["chain", "chain-bf", "ngram-bf"]).items():
        engine = make_engine(pipeline, "reference", "cpu", None)
        r = mod.measure(engine, prompts, warm=1, steps=1, max_new=16)
        host = [s for s in r["segments"] if s["host"]]
        if name == "ngram-bf":
            assert [s["ops"] for s in host] == [["draft.ngram"]]
            assert r["host_ops"] > 0 and host[0]["forward_ops"] == 0  # the lookup launches no forward
        else:
            assert host == [] and r["host_ops"] == 0
            syncs[name] = [s["sync_kinds"] for s in r["segments"]]
        assert r["device_ops"] > 0 and r["outside"]["sync_kinds"].get("cpu") == 1  # the engine's readback
        assert r["tokens"] == mod.decode_tokens(engine, prompts, 3, max_new=16), name  # warm + counted + timed
        assert engine.program.observer is None
    # the packed verify and the budget add no device->host read to the chain's step (the reference
    # backend's drafter catch-up reads its feed length in both)
    assert syncs["chain-bf"] == syncs["chain"], syncs


def test_observer_is_entered_around_each_segment_in_order():
    mod = load_bench_script("host_ops")
    pipeline = mod.zoo_pipelines(["ngram-bf"])["ngram-bf"]
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
    hosts = [seg["host"] for seg in engine.program.describe()]
    assert True in hosts and False in hosts, hosts
    assert seen == [(edge, i, host) for i, host in enumerate(hosts) for edge in ("enter", "exit")]
