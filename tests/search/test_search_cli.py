"""`specir search` end to end on a tiny pair (local process pool): the report, best.spec passing
`specir check`, a cheating --plugin pass never kept nor stored, resume, and the error paths."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from specir.search.memory import Memory
from tests.search.conftest import search_args

BROKEN = Path(__file__).resolve().parents[1] / "helpers" / "broken_plugin.py"


@pytest.fixture(scope="module")
def searched(search_pair, tmp_path_factory):
    from specir.cli.main import main
    spec, prompts = search_pair
    root = tmp_path_factory.mktemp("search")
    out, memory = root / "out", root / "memory.sqlite"
    code = main([str(a) for a in search_args(spec, prompts, out, memory, "--budget", 3, "--workers", 2,
                                             "--plugin", BROKEN)])
    return code, out, memory, spec, prompts


def test_the_report_has_baseline_best_and_every_candidate(searched):
    code, out, *_ = searched
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["evaluations"] == 3 and len(report["candidates"]) == 3
    for key in ("speedup", "tau", "tokens_per_s"):
        assert report["baseline"][key] is not None and report["best"][key] is not None
    assert report["candidates"][0]["pipeline"] == "" and report["candidates"][0]["origin"] == "input"
    for c in report["candidates"]:
        assert {"pipeline", "predicted_speedup", "measured_speedup", "tau", "verdict", "seconds", "status"} <= set(c)
    validated = [c for c in report["candidates"] if c["status"] == "validated"]
    assert validated and all(c["verdict"]["ok"] and c["timed_forcing"]["ok"] for c in validated)
    for c in validated:  # each stage timed, and the worker's log says when each ended
        assert set(c["stages"]) == {"compile", "guard", "timing", "forcing"} and sum(c["stages"].values()) <= c["seconds"] + 0.05
    log = (out / "candidates" / "0000" / "worker.log").read_text()
    assert all(f"{stage}: started" in log for stage in ("compile", "guard", "timing", "forcing")), log[-2000:]
    assert report["best"]["speedup"] == max(c["measured_speedup"] for c in validated)
    assert len({c["ir_digest"] for c in report["candidates"]}) == 3
    assert (out / "report.md").read_text().startswith("# specir search")
    assert (out / "progress.png").read_bytes()[:4] == b"\x89PNG"
    assert "gap" in report and report["gap"]["biggest"] in ("draft", "verify", "acceptance", "overhead")


def test_a_cheating_plugin_pass_is_tried_caught_and_never_kept(searched):
    _, out, memory, *_ = searched
    report = json.loads((out / "report.json").read_text())
    cheat = [c for c in report["candidates"] if "use-broken" in c["pipeline"]]
    assert cheat, "the --plugin pass joins the space and is tried"
    assert all(c["status"] == "guard failed" and not c["kept"] and c["verdict"]["mismatches"] > 0 for c in cheat)
    assert all(c["sandbox"] and c["sandbox"]["writes_confined"] is not None for c in cheat)
    assert "use-broken" not in (report["best"]["pipeline"] or "")
    stored = Memory(memory).list()
    assert stored and all("use-broken" not in m["pipeline"] for m in stored)
    assert all(m["verdict"]["ok"] for m in stored)


def test_best_spec_passes_check(searched, specir_cli):
    _, out, _, _, prompts = searched
    text = (out / "best.spec").read_text()
    assert "// pass pipeline:" in text
    code, stdout, err = specir_cli("check", out / "best.spec", "--prompts", prompts, "--limit", 3,
                                   "--max-new-tokens", 6)
    assert code == 0 and stdout.startswith("PASS"), err


def test_resume_continues_without_evaluating_anything_twice(searched, specir_cli):
    _, out, memory, spec, prompts = searched
    code, _, err = specir_cli(*search_args(spec, prompts, out, memory, "--budget", 4, "--workers", 1,
                                           "--plugin", BROKEN))
    assert code == 2 and "already holds a search" in err and "--resume" in err
    code, _, err = specir_cli(*search_args(spec, prompts, out, memory, "--budget", 4, "--workers", 1,
                                           "--plugin", BROKEN, "--resume"))
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["evaluations"] == 4
    digests = [c["ir_digest"] for c in report["candidates"]]
    assert len(set(digests)) == len(digests)
    code, _, err = specir_cli(*search_args(spec, prompts, out, memory, "--budget", 4, "--workers", 1, "--resume",
                                           "--batch-size", 2))
    assert code == 2 and "different settings" in err


def test_bad_flags_are_one_error_with_a_hint(specir_cli, search_pair, tmp_path):
    spec, prompts = search_pair
    code, _, err = specir_cli(*search_args(spec, prompts, tmp_path / "o", tmp_path / "m", "--budget", 0))
    assert code == 2 and "--budget must be at least 1" in err and "hint:" in err
    code, _, err = specir_cli(*search_args(spec, prompts, tmp_path / "o", tmp_path / "m", "--target", "tpu"))
    assert code == 2 and "unknown target" in err
    code, _, err = specir_cli(*search_args(spec, prompts, tmp_path / "o3", tmp_path / "m", "--agent-base-url",
                                           "http://127.0.0.1:9/v1"))
    assert code == 2 and "--agent-base-url needs --agent" in err


def test_a_bad_space_file_is_one_error_at_its_line(specir_cli, search_pair, tmp_path):
    spec, prompts = search_pair
    space = tmp_path / "space.txt"
    space.write_text("(input)\ndraft-shape{k=2\n")
    code, _, err = specir_cli(*search_args(spec, prompts, tmp_path / "o", tmp_path / "m", "--space", space))
    assert code == 2 and f"{space}:2:" in err and "Traceback" not in err
