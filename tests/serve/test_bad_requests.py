"""Bad requests get an OpenAI-style JSON error with a 4xx status and a clear message; a full queue
is a 429; a client that disconnects mid-stream frees its slot at once."""
from __future__ import annotations

import http.client
import json

import openai
import pytest

from tests.helpers.serving import client, get, metric, post, serving, wait_for

CONTEXT = 512
HOLD = 480  # tokens of a request that holds its slot (its greedy output has no end-of-sequence)


@pytest.fixture(scope="module")
def server(zoo):
    """One slot and no queue: a second request while one decodes is a 429."""
    session, engine = zoo
    with serving(session, engine, max_batch_size=1, max_queue=0, max_model_len=CONTEXT) as srv:
        yield srv


def _error(status_body):
    status, body = status_body
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    return status, body["error"]


CASES = [  # (body or raw bytes, status, param, words in the message)
    (b"{not json", 400, None, "not valid JSON"),
    (b"[1, 2]", 400, None, "must be a JSON object"),
    ({"model": "gpt-4", "prompt": "x"}, 404, "model", "`gpt-4` does not exist"),
    ({"model": "code"}, 400, "prompt", "prompt is required"),
    ({"prompt": ""}, 400, "prompt", "prompt is empty"),
    ({"prompt": [5, 99999]}, 400, "prompt", "outside the model's vocabulary"),
    ({"prompt": [5] * CONTEXT, "max_tokens": 1}, 400, "prompt", f"maximum context length is {CONTEXT}"),
    ({"prompt": [5] * 400, "max_tokens": 200}, 400, "max_tokens", "you requested 600 tokens"),
    ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens", "at least 1"),
    ({"prompt": "x", "max_tokens": "8"}, 400, "max_tokens", "must be an integer"),
    (b'{"prompt": "x", "temperature": NaN}', 400, "temperature", "finite number >= 0"),
    ({"prompt": "x", "temperature": -0.5}, 400, "temperature", "finite number >= 0"),
    ({"prompt": "x", "stop": [""]}, 400, "stop", "non-empty strings or token ids"),
    ({"prompt": "x", "stream": "yes"}, 400, "stream", "true or false"),
    ({"prompt": "x", "top_p": 0.5}, 400, "top_p", "not supported"),
    ({"prompt": "x", "n": 0}, 400, "n", "from 1 to"),
    ({"prompt": "x", "seed": 1.5}, 400, "seed", "must be an integer"),
]


@pytest.mark.parametrize("body,status,param,words", CASES, ids=[c[3] for c in CASES])
def test_bad_completion_requests(server, body, status, param, words):
    raw = body if isinstance(body, bytes) else None
    got, err = _error(post(server, "/v1/completions", None if raw else body, raw=raw))
    assert got == status and err["param"] == param and words in err["message"], err
    assert err["type"] == "invalid_request_error"


@pytest.mark.parametrize("body,words", [
    ({"messages": []}, "non-empty list"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "role must be one of"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "text part"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0}, "at least 1"),
    ({"messages": [{"role": "user", "content": "hi " * CONTEXT}]}, "maximum context length"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}, "not supported"),
])
def test_bad_chat_requests(server, body, words):
    status, err = _error(post(server, "/v1/chat/completions", body))
    assert status == 400 and words in err["message"], err


def test_the_openai_client_sees_the_errors(server):
    c = client(server)
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        c.completions.create(model="nope", prompt="x", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="max_tokens must be at least 1"):
        c.completions.create(model="code", prompt="x", max_tokens=0)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        c.chat.completions.create(model="code", messages=[{"role": "user", "content": "x"}], temperature=-1)


def test_unknown_routes_and_methods_are_json_errors(server):
    status, text = get(server, "/v1/nothing")
    assert status == 404 and "no route" in json.loads(text)["error"]["message"]
    status, text = get(server, "/v1/completions")
    assert status == 405 and "not allowed" in json.loads(text)["error"]["message"]
    status, text = get(server, "/v1/models/other")
    assert status == 404 and json.loads(text)["error"]["code"] == "model_not_found"


def _open_stream(server, max_tokens: int):
    """A streaming completion on a raw connection, read up to its second data line."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    body = json.dumps({"prompt": "def parse_args(", "max_tokens": max_tokens, "temperature": 0, "stream": True})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    seen = 0
    while seen < 2:
        line = resp.fp.readline()
        assert line, "stream ended early"
        seen += line.startswith(b"data: {")
    return conn


def test_full_queue_is_429_and_a_disconnect_frees_the_slot(server):
    cancelled = metric(server, 'specir_requests_total{finish_reason="cancelled"}')
    conn = _open_stream(server, HOLD)  # holds the only slot
    assert metric(server, "specir_running_requests") == 1
    status, err = _error(post(server, "/v1/completions", {"prompt": "x", "max_tokens": 2}))
    assert status == 429 and err["type"] == "rate_limit_error" and "--max-queue" in err["message"]
    with pytest.raises(openai.RateLimitError):
        client(server).completions.create(model="code", prompt="x", max_tokens=2)
    conn.close()  # the client goes away mid-stream
    wait_for(lambda: metric(server, "specir_running_requests") == 0, what="the slot to be freed")
    assert metric(server, 'specir_requests_total{finish_reason="cancelled"}') == cancelled + 1
    r = client(server).completions.create(model="code", prompt="x", max_tokens=2, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 2


def test_a_disconnect_while_waiting_leaves_the_queue(zoo):
    session, engine = zoo
    with serving(session, engine, max_batch_size=2, max_queue=2, max_model_len=CONTEXT) as srv:
        holders = [_open_stream(srv, HOLD) for _ in range(2)]
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        conn.request("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": 2}),
                     {"Content-Type": "application/json"})
        wait_for(lambda: metric(srv, "specir_queue_depth") == 1, what="a queued request")
        conn.close()  # leaves while queued
        wait_for(lambda: metric(srv, "specir_queue_depth") == 0, what="the queue to empty")
        for h in holders:
            h.close()
        wait_for(lambda: metric(srv, "specir_running_requests") == 0, what="the slots to be freed")
        assert post(srv, "/v1/completions", {"prompt": "x", "max_tokens": 2, "temperature": 0})[0] == 200
