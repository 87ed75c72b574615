"""`specir serve` as a user runs it: a subprocess on a free port, the openai client, SIGTERM; and its
option errors (one message with a hint, exit 2, no traceback)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.serving import client, get


@pytest.mark.parametrize("argv,words", [
    (["--port", "70000"], "--port must be from 0 to 65535"),
    (["--max-batch-size", "0"], "--max-batch-size must be at least 1"),
    (["--max-queue", "-1"], "--max-queue must be 0 or more"),
    (["--max-model-len", "1"], "--max-model-len must be at least 2"),
    (["nothing-here.spec"], "nothing-here.spec"),
])
def test_option_errors(specir_cli, argv, words):
    code, out, err = specir_cli("serve", *argv)
    assert code == 2 and words in err and "hint:" in err and "Traceback" not in err, err


def test_max_model_len_past_the_context(specir_cli):
    code, _, err = specir_cli("serve", "--port", "0", "--max-model-len", str(1 << 20))
    assert code == 2 and "the target's context of 131072" in err and "hint:" in err, err


class _Server:
    def __init__(self, url):
        self.url = url


def test_serve_subprocess(tmp_path):
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "specir.cli.main", "serve", "--port", "0", "--max-batch-size", "2",
                             "--max-model-len", "256"], stdout=subprocess.DEVNULL, stderr=log, env=os.environ.copy())
    try:
        deadline, url = time.monotonic() + 240, None
        while url is None:
            assert proc.poll() is None, open(tmp_path / "serve.log").read()
            assert time.monotonic() < deadline, "the server did not start"
            found = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", open(tmp_path / "serve.log").read())
            url = found.group(1) if found else None
            time.sleep(0.2)
        server = _Server(url)
        assert get(server, "/health")[0] == 200
        r = client(server).completions.create(model="code", prompt="def fibonacci(", max_tokens=8, temperature=0)
        assert r.usage.completion_tokens == 8 and r.choices[0].text
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, open(tmp_path / "serve.log").read()
