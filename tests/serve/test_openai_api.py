"""The OpenAI API with the real openai client: completions and chat, streaming and not, max_tokens,
temperature and seed, stop strings and stop ids, n and prompt lists, /v1/models, /health, /metrics."""
from __future__ import annotations

import pytest

from specir.runtime.tokenizer import load_tokenizer
from specir.serve.chat_template import render_fallback
from tests.helpers.serving import client, get, metric, serving

PROMPT = "def fibonacci(n):"
MESSAGES = [{"role": "system", "content": "You write Python."}, {"role": "user", "content": "def add(a, b):"}]
N = 24


@pytest.fixture(scope="module")
def api(zoo):
    """(server, tokenizer, expected): greedy and seeded outputs computed by the engine before the
    server decodes anything."""
    session, engine = zoo
    tok = load_tokenizer(str(session.target_folder()))
    prompt = tok(PROMPT)["input_ids"]
    chat_prompt = tok(render_fallback(MESSAGES))["input_ids"]
    expected = {
        "greedy": engine.generate([prompt], N)[0].tokens,
        "chat": engine.generate([chat_prompt], N)[0].tokens,
        "sampled": engine.generate([prompt], N, temperature=0.9, seed=7)[0].tokens,
        "prompt": prompt, "chat_prompt": chat_prompt,
    }
    with serving(session, engine, max_batch_size=4, max_queue=16, max_model_len=512) as server:
        yield server, tok, expected


def test_completion_equals_engine_generate(api):
    server, tok, want = api
    r = client(server).completions.create(model="code", prompt=PROMPT, max_tokens=N, temperature=0,
                                          extra_body={"return_token_ids": True})
    choice = r.choices[0]
    assert choice.token_ids == want["greedy"] and choice.prompt_token_ids == want["prompt"]
    assert choice.text == tok.decode(want["greedy"], skip_special_tokens=True)
    assert choice.finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(want["prompt"]), N)
    assert r.object == "text_completion" and r.model == "code" and r.id.startswith("cmpl-")


def test_streamed_completion_equals_the_whole_one(api):
    server, tok, want = api
    chunks = list(client(server).completions.create(model="code", prompt=PROMPT, max_tokens=N, temperature=0,
                                                    stream=True, stream_options={"include_usage": True},
                                                    extra_body={"return_token_ids": True}))
    pieces = [c for c in chunks if c.choices]
    assert len(pieces) > 1  # streamed, not one final chunk
    assert "".join(c.choices[0].text for c in pieces) == tok.decode(want["greedy"], skip_special_tokens=True)
    assert [t for c in pieces for t in c.choices[0].token_ids] == want["greedy"]
    assert [c.choices[0].finish_reason for c in pieces][-1] == "length"
    assert all(c.choices[0].finish_reason is None for c in pieces[:-1])
    assert chunks[-1].usage.completion_tokens == N and not chunks[-1].choices


def test_token_id_prompt(api):
    server, _, want = api
    r = client(server).completions.create(model="code", prompt=want["prompt"], max_tokens=N, temperature=0,
                                          extra_body={"return_token_ids": True})
    assert r.choices[0].token_ids == want["greedy"]


def test_chat_uses_the_fallback_template(api):
    server, tok, want = api
    c = client(server)
    r = c.chat.completions.create(model="code", messages=MESSAGES, max_tokens=N, temperature=0,
                                  extra_body={"return_token_ids": True})
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == tok.decode(want["chat"], skip_special_tokens=True)
    assert r.choices[0].prompt_token_ids == want["chat_prompt"] and r.object == "chat.completion"
    chunks = list(c.chat.completions.create(model="code", messages=MESSAGES, max_tokens=N, temperature=0,
                                            stream=True))
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].object == "chat.completion.chunk"
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == r.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == "length"
    models = c.models.list().data
    assert [m.id for m in models] == ["code"] and models[0].chat_template == "transcript"


def test_seeded_sampling_is_reproducible(api):
    server, _, want = api
    c = client(server)
    runs = [c.completions.create(model="code", prompt=PROMPT, max_tokens=N, temperature=0.9, seed=7,
                                 extra_body={"return_token_ids": True}).choices[0].token_ids for _ in range(2)]
    # the same stream as `specir run --temperature 0.9 --seed 7` (engine.generate, request 0)
    assert runs[0] == runs[1] == want["sampled"]


def test_stop_strings_cut_the_text_streamed_or_not(api):
    server, tok, want = api
    full = tok.decode(want["greedy"], skip_special_tokens=True)
    at = next(i for i in range(8, len(full) - 4) if full.find(full[i:i + 4]) == i and full[i:i + 4].strip())
    stop = full[at:at + 4]
    c = client(server)
    r = c.completions.create(model="code", prompt=PROMPT, max_tokens=N, temperature=0, stop=[stop, "never-said"])
    assert r.choices[0].text == full[:at] and r.choices[0].finish_reason == "stop"
    streamed = list(c.completions.create(model="code", prompt=PROMPT, max_tokens=N, temperature=0, stop=stop,
                                         stream=True))
    assert "".join(ch.choices[0].text for ch in streamed) == r.choices[0].text
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_stop_token_ids(api):
    server, tok, want = api
    stop_id = want["greedy"][5]
    first = want["greedy"].index(stop_id)
    for body in ({"stop": [stop_id]}, {"stop_token_ids": [stop_id]}):
        r = client(server).completions.create(model="code", prompt=PROMPT, max_tokens=N, temperature=0,
                                              extra_body={**body, "return_token_ids": True})
        assert r.choices[0].token_ids == want["greedy"][:first + 1] and r.choices[0].finish_reason == "stop"
        assert r.choices[0].text == tok.decode(want["greedy"][:first], skip_special_tokens=True)


def test_n_and_prompt_lists(api):
    server, _, want = api
    c = client(server)
    r = c.completions.create(model="code", prompt=[PROMPT, "import os\n"], max_tokens=8, temperature=0, n=2,
                             extra_body={"return_token_ids": True})
    assert [ch.index for ch in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].token_ids == r.choices[1].token_ids == want["greedy"][:8]
    assert r.choices[2].token_ids == r.choices[3].token_ids != r.choices[0].token_ids
    sampled = c.completions.create(model="code", prompt=PROMPT, max_tokens=8, temperature=1.0, seed=3, n=3,
                                   extra_body={"return_token_ids": True})
    assert len({tuple(ch.token_ids) for ch in sampled.choices}) > 1  # each choice its own stream


def test_health_models_and_metrics(api):
    server, _, _ = api
    assert get(server, "/health") == (200, '{"status": "ok"}')
    status, text = get(server, "/metrics")
    assert status == 200
    for name in ("specir_requests_total", "specir_tokens_per_second", "specir_tau", "specir_queue_depth",
                 "specir_step_seconds", "specir_prefill_seconds", "specir_draft_acceptance_rate",
                 "specir_running_requests"):
        assert f"# TYPE {name} " in text, name
    assert metric(server, 'specir_requests_total{finish_reason="length"}') >= 3
    assert metric(server, "specir_generation_tokens_total") >= 3 * N
    assert 1.0 <= metric(server, "specir_tau") <= 5.0
    rates = [metric(server, f'specir_draft_acceptance_rate{{position="{i}"}}') for i in range(1, 5)]
    assert all(0.0 <= r <= 1.0 for r in rates) and rates == sorted(rates, reverse=True) and rates[0] > 0
    assert metric(server, "specir_step_seconds_count") > 0
    assert 0 < metric(server, "specir_prefill_seconds_count") <= metric(server, "specir_prompt_tokens_total")
    assert metric(server, "specir_queue_depth") == 0 and metric(server, "specir_max_batch_size") == 4
    assert metric(server, 'specir_http_responses_total{path="/v1/completions",status="200"}') >= 3
