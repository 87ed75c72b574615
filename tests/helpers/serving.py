"""Talking to a specir server in tests: start one on loopback, the openai client, raw HTTP, /metrics."""
from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request

from specir.serve.server import Server, Service


@contextlib.contextmanager
def serving(session, engine, **options):
    """A started Server on 127.0.0.1 (a free port), stopped on exit."""
    server = Server(Service(session, engine, **options), "127.0.0.1", 0).start()
    try:
        yield server
    finally:
        server.stop()


def client(server, **kwargs):
    import openai
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120, **kwargs)


def post(server, path: str, body, *, raw: bytes | None = None) -> tuple[int, dict]:
    """POST JSON (or raw bytes) with urllib: (status, decoded JSON body)."""
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(server.url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def get(server, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(server.url + path, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def metric(server, name: str) -> float:
    """One sample of /metrics by its full name with labels, e.g. 'specir_running_requests'."""
    _, text = get(server, "/metrics")
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise KeyError(name)


def wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
