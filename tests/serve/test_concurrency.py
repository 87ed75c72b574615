"""Concurrent clients: 16 threads with the openai client, each output token-forced against the
target and equal to engine.generate of its prompt; then a bounded load test on loopback (a fixed
number of requests under a deadline) that prints tokens/s and p50/p99 latency (speed is not
asserted: CPU timing on a shared machine is noisy)."""
from __future__ import annotations

import statistics
import threading
import time

import pytest

from specir.runtime.baseline import target_name
from specir.runtime.token_forcing import Reference, force
from specir.runtime.tokenizer import load_tokenizer
from specir.zoo import workloads
from tests.helpers.serving import client, metric, serving

CLIENTS, N, MIXED = 16, 20, 4
LOAD_REQUESTS, LOAD_CONCURRENCY, LOAD_TOKENS, LOAD_DEADLINE_S = 32, 8, 16, 240.0


def _prompts(count: int) -> list[str]:
    texts = [row["prompt"] for name in workloads.names() for row in workloads.load(name) if "prompt" in row]
    return [t[-200:] for t in texts[:count]]


@pytest.fixture(scope="module")
def setup(zoo):
    session, engine = zoo
    tok = load_tokenizer(str(session.target_folder()))
    texts = _prompts(CLIENTS)
    assert len(texts) == CLIENTS
    ids = [tok(t)["input_ids"] for t in texts]
    expected = [r.tokens for r in engine.generate(ids, N)]
    sampled = [engine.generate([p], N, temperature=0.8, seed=100 + i)[0].tokens for i, p in enumerate(ids[:MIXED])]
    with serving(session, engine, max_batch_size=8, max_queue=64, max_model_len=512) as server:
        yield session, server, texts, ids, expected, sampled


def test_concurrent_clients_are_token_forced(setup):
    session, server, texts, ids, expected, _ = setup
    c = client(server)
    outputs: list = [None] * CLIENTS

    def one(i: int) -> None:
        kwargs = dict(model="code", prompt=texts[i], max_tokens=N, temperature=0, extra_body={"return_token_ids": True})
        if i % 2:
            chunks = c.completions.create(stream=True, **kwargs)
            outputs[i] = (None, [t for ch in chunks for t in ch.choices[0].token_ids])
        else:
            r = c.completions.create(**kwargs)
            outputs[i] = (r.choices[0].prompt_token_ids, r.choices[0].token_ids)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert all(o is not None for o in outputs), "a client did not finish"
    assert all(p is None or p == ids[i] for i, (p, _) in enumerate(outputs))
    got = [o for _, o in outputs]
    assert got == expected  # the same as the engine's own generate, token for token
    model = session.pipeline.model(target_name(session.pipeline))
    report = force(Reference.of_model(model, "cpu"), ids, got)
    assert report.ok and report.checked == sum(map(len, got)), report.as_dict()
    print(f"\ntoken forcing: {report.checked} tokens, {report.mismatches} mismatches, {report.near_ties} near-ties")


def test_bounded_load(setup):
    _, server, texts, _, _, _ = setup
    c = client(server)
    latencies, tokens, errors = [], [0], []
    lock = threading.Lock()
    next_index = iter(range(LOAD_REQUESTS))
    deadline = time.monotonic() + LOAD_DEADLINE_S

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            start = time.perf_counter()
            try:
                r = c.completions.create(model="code", prompt=texts[i % len(texts)], max_tokens=LOAD_TOKENS,
                                         temperature=0.8, seed=i)
            except Exception as exc:  # counted, reported by the assert below
                errors.append(exc)
                continue
            with lock:
                latencies.append(time.perf_counter() - start)
                tokens[0] += r.usage.completion_tokens

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(LOAD_CONCURRENCY)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(LOAD_DEADLINE_S + 60)
    wall = time.perf_counter() - start
    assert not errors, errors[:3]
    assert len(latencies) == LOAD_REQUESTS, f"{len(latencies)} of {LOAD_REQUESTS} done in {LOAD_DEADLINE_S} s"
    lat = sorted(latencies)
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    print(f"\nload: {LOAD_REQUESTS} requests, concurrency {LOAD_CONCURRENCY}, {tokens[0]} tokens in {wall:.1f} s: "
          f"{tokens[0] / wall:.1f} tok/s, latency p50 {statistics.median(lat):.2f} s, p99 {p99:.2f} s, "
          f"tau {metric(server, 'specir_tau'):.2f}")
    assert metric(server, "specir_running_requests") == 0 and metric(server, "specir_queue_depth") == 0


def test_mixed_greedy_and_sampled_clients(setup):
    """Sampled and greedy requests at once (greedy ones then join the sampling session): each greedy
    output is still the greedy one, each seeded one what engine.generate samples with that seed."""
    _, server, texts, _, expected, sampled = setup
    c = client(server)
    got: dict = {}

    def one(key) -> None:
        kind, i = key
        kwargs = dict(temperature=0.8, seed=100 + i) if kind == "sampled" else dict(temperature=0)
        r = c.completions.create(model="code", prompt=texts[i], max_tokens=N, extra_body={"return_token_ids": True},
                                 **kwargs)
        got[key] = r.choices[0].token_ids

    keys = [(kind, i) for i in range(MIXED) for kind in ("sampled", "greedy")]
    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [got.get(("greedy", i)) for i in range(MIXED)] == expected[:MIXED]
    assert [got.get(("sampled", i)) for i in range(MIXED)] == sampled
