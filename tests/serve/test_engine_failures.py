"""A request that makes the engine raise (in its prefill or in a decode step) is answered with an
error; the requests batched with it finish with the output they would have had, and the server
goes on serving. The faults are injected around the real engine (tests/serve: FaultyEngine)."""
from __future__ import annotations

import threading

import openai
import pytest

from specir.runtime.tokenizer import load_tokenizer
from tests.helpers.serving import client, get, metric, serving

STEP_POISON = [4001, 4002, 4003]  # a request whose prompt starts so makes every step it is in raise
PREFILL_POISON = [4011, 4012, 4013]  # ... makes its prefill raise
PROMPTS = ["def fibonacci(n):", "import os\n", "class Stack:", "for i in range("]
N = 24


class FaultyDecode:
    def __init__(self, decode):
        self._decode = decode

    def __getattr__(self, name):
        return getattr(self._decode, name)

    def add_many(self, items):
        if any(list(item[0][:3]) == PREFILL_POISON for item in items):
            raise RuntimeError("injected prefill fault")
        return self._decode.add_many(items)

    def add(self, prompt, max_new, temperature=0.0, seed=0, stop=()):
        return self.add_many([(prompt, max_new, temperature, seed, stop)])[0]

    def step(self):
        if any(r is not None and not r.done and r.prompt[:3] == STEP_POISON for r in self._decode.slots):
            raise RuntimeError("injected step fault")
        return self._decode.step()


class FaultyEngine:
    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def open(self, *args, **kwargs):
        return FaultyDecode(self._engine.open(*args, **kwargs))


@pytest.fixture(scope="module")
def expected(zoo):
    session, engine = zoo
    tok = load_tokenizer(str(session.target_folder()))
    ids = [tok(p)["input_ids"] for p in PROMPTS]
    return {p: r.tokens for p, r in zip(PROMPTS, engine.generate(ids, N))}


def test_failing_requests_do_not_take_others_down(zoo, expected):
    session, engine = zoo
    with serving(session, FaultyEngine(engine), max_batch_size=3, max_queue=8, max_model_len=256) as server:
        c = client(server)
        results: dict = {}

        def run(key, kwargs):
            kwargs = dict(kwargs)
            try:
                if kwargs.pop("stream", False):
                    chunks = list(c.completions.create(model="code", max_tokens=N, temperature=0, stream=True,
                                                       extra_body={"return_token_ids": True}, **kwargs))
                    results[key] = [t for ch in chunks for t in ch.choices[0].token_ids]
                else:
                    r = c.completions.create(model="code", max_tokens=N, temperature=0,
                                             extra_body={"return_token_ids": True}, **kwargs)
                    results[key] = r.choices[0].token_ids
            except openai.APIError as exc:
                results[key] = exc

        jobs = [("step", dict(prompt=STEP_POISON + [5, 6])), ("prefill", dict(prompt=PREFILL_POISON + [5]))]
        jobs += [(p, dict(prompt=p, stream=i % 2 == 1)) for i, p in enumerate(PROMPTS)]
        threads = [threading.Thread(target=run, args=job, daemon=True) for job in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        for p in PROMPTS:
            assert results[p] == expected[p], p
        for key in ("step", "prefill"):
            err = results[key]
            assert isinstance(err, openai.InternalServerError), (key, err)
            assert "the engine failed on this request" in str(err) and f"injected {key} fault" in str(err)
        assert metric(server, "specir_engine_failures_total") >= 1
        assert metric(server, 'specir_requests_total{finish_reason="error"}') == 2
        assert metric(server, "specir_running_requests") == 0 and metric(server, "specir_queue_depth") == 0
        assert get(server, "/health")[0] == 200
        again = c.completions.create(model="code", prompt=PROMPTS[0], max_tokens=N, temperature=0,
                                     extra_body={"return_token_ids": True})
        assert again.choices[0].token_ids == expected[PROMPTS[0]]


def test_a_step_failure_mid_stream_is_an_error_event(zoo):
    session, engine = zoo
    with serving(session, FaultyEngine(engine), max_batch_size=2, max_queue=2, max_model_len=256) as server:
        with pytest.raises(openai.APIError, match="injected step fault"):
            list(client(server).completions.create(model="code", prompt=STEP_POISON, max_tokens=N, stream=True))
        assert client(server).completions.create(model="code", prompt="x", max_tokens=2).usage.completion_tokens == 2
