"""Candidates evaluated on a Ray cluster started on loopback for the test (`--ray ADDRESS`)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.search.conftest import search_args

pytest.importorskip("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_search_on_a_local_ray_cluster(search_pair, tmp_path, specir_cli):
    spec, prompts = search_pair
    ray = str(Path(sys.executable).with_name("ray"))
    port = _free_port()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    # --block keeps the head in this process group: the test ends exactly what it started
    head = subprocess.Popen([ray, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
                             "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats",
                             "--temp-dir", str(tmp_path / "ray")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        for _ in range(600):
            if _listening(port) or head.poll() is not None:
                break
            time.sleep(0.5)
        assert head.poll() is None and _listening(port), "the Ray head did not start"
        code, out, err = specir_cli(*search_args(spec, prompts, tmp_path / "out", tmp_path / "m.sqlite",
                                                 "--budget", 2, "--workers", 2, "--ray", f"127.0.0.1:{port}"))
        assert code == 0, err
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        assert report["ray"] == f"127.0.0.1:{port}" and report["evaluations"] == 2
        assert all(c["status"] == "validated" for c in report["candidates"]), report["candidates"]
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
