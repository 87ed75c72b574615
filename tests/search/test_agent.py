"""The agent path through the real litellm client, against a loopback server replaying recorded
replies: a useful pass, one that fails to import, one that loops forever, one that cheats."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from specir.search.memory import Memory
from tests.search.conftest import search_args
from tests.search.replay_server import ReplayServer

REPLIES = Path(__file__).with_name("replies")

pytest.importorskip("litellm")


def test_agent_passes_are_sandboxed_judged_and_kept_only_when_validated_and_faster(search_pair, tmp_path,
                                                                                     specir_cli):
    spec, prompts = search_pair
    replies = [(REPLIES / f"{n}.md").read_text() for n in ("useful", "broken_import", "loops", "cheats")]
    memory = tmp_path / "memory.sqlite"
    with ReplayServer(replies) as server:
        code, out, err = specir_cli(*search_args(spec, prompts, tmp_path / "out", memory, "--budget", 5,
                                                 "--workers", 1, "--agent", "openai/replay", "--agent-base-url",
                                                 server.url, "--candidate-timeout", 45))
    assert code == 0, err
    assert len(server.requests) == 4 and server.requests[0]["path"].endswith("/chat/completions")
    prompt = server.requests[0]["body"]["messages"][-1]["content"]
    for part in ("gap report", "Current IR", "class WidenDraft(Pass)", "nearest deployments", "step(%ctx: context)"):
        assert part in prompt
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    agent = {c["pipeline"].split(",")[-1]: c for c in report["candidates"] if c["origin"] == "agent"}
    assert set(agent) == {"lookup-draft", "broken-import", "think-forever", "accept-all"}
    for c in agent.values():  # each reply lies in the search folder and ran only in the sandbox
        assert c["plugins"] and Path(c["plugins"][-1]).parent == tmp_path / "out" / "agent"
    useful = agent["lookup-draft"]
    assert useful["status"] == "validated" and useful["verdict"]["ok"] and useful["timed_forcing"]["ok"]
    input_speedup = report["candidates"][0]["measured_speedup"]
    assert useful["kept"] == (useful["measured_speedup"] > input_speedup)
    assert agent["broken-import"]["status"] == "import failed" and "a_module_that_does_not_exist" in \
        agent["broken-import"]["error"]
    assert agent["think-forever"]["status"] == "timed out" and "wall-time limit" in agent["think-forever"]["error"]
    cheat = agent["accept-all"]
    assert cheat["status"] == "guard failed" and not cheat["kept"] and cheat["verdict"]["mismatches"] > 0
    stored = Memory(memory).list()
    assert all("accept-all" not in m["pipeline"] and "think-forever" not in m["pipeline"] for m in stored)
    if useful["kept"]:
        kept = [m for m in stored if "lookup-draft" in m["pipeline"]]
        assert kept and "class LookupDraft" in kept[0]["pass_source"] and kept[0]["pass_hash"].startswith("sha256:")
