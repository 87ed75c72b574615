"""Whole pipelines on the TVM backend (the CPU target's): chain, tree and n-gram pass token forcing
with zero mismatches; compile writes the kernels into the build and lists them; a second run
compiles nothing; a cold cache compiles with a progress line; without apache-tvm everything
runs on the reference backend after a one-line note."""
from __future__ import annotations

import json
import shutil
import sys

import pytest

from specir.backends.tvm import kernel_cache, lowering
from tests.helpers.specs import write_prompts, write_spec

PIPELINES = {
    "chain": dict(k=4),
    "tree": dict(k=4, passes="tree-verify{budget=10,topk=3}"),
    "ngram": dict(k=3),
}


@pytest.mark.parametrize("kind", sorted(PIPELINES))
def test_pipeline_passes_token_forcing_on_tvm(kind, tmp_path, pair, specir_cli):
    target, drafter = pair
    spec = write_spec(tmp_path, kind, target, "ngram" if kind == "ngram" else drafter, **PIPELINES[kind])
    prompts = write_prompts(tmp_path, 6, 259, seed=7, repetitive=kind == "ngram")
    code, out, err = specir_cli("check", spec, "--target", "cpu", "--prompts", prompts, "--batch-size", 3,
                                "--max-new-tokens", 16, "--json", "--limit", 0)
    report = json.loads(out)
    assert report["backend"] == "tvm", err
    assert code == 0 and report["mismatches"] == 0, (report, err)
    assert report["tokens_checked"] == 6 * 16


def test_compile_lists_kernels_and_runs_compile_nothing(tmp_path, pair, specir_cli, monkeypatch):
    target, drafter = pair
    spec = write_spec(tmp_path, "tree", target, drafter, **PIPELINES["tree"])
    code, out, err = specir_cli("compile", spec, "--target", "cpu", "-o", tmp_path / "build")
    assert code == 0, err
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    assert manifest["backend"] == "tvm"
    rows = [r for r in manifest["kernels"] if r["backend"] == "tvm"]
    assert {r["op"] for r in rows} == {"linear", "rms_norm", "rope", "swiglu", "attention"}
    for row in rows:
        assert row["kernel"].startswith("specir.backends.tvm.") and row["shape"]
        assert (tmp_path / "build" / row["file"]).is_file() and row["file"] in manifest["files"]
        assert (tmp_path / "build" / row["source"]).read_text().count("@T.prim_func") == 1  # the scheduled TIR
    assert any("tree-mask" in r["shape"] for r in rows if r["op"] == "attention")

    # the build alone serves every kernel: an empty user cache, and nothing compiles
    monkeypatch.setenv("SPECIR_CACHE", str(tmp_path / "empty-cache"))
    before = kernel_cache.compile_count()
    code, out, err = specir_cli("run", tmp_path / "build", "--prompt-ids", "5,6,7,8", "--max-new-tokens", 12, "--json")
    assert code == 0, err
    assert json.loads(out)["backend"] == "tvm" and "compiling" not in err
    code, out, err = specir_cli("run", spec, "--prompt-ids", "5,6,7,8", "--max-new-tokens", 12, "--json")
    assert code == 0 and json.loads(out)["backend"] == "tvm"
    compiled_once = kernel_cache.compile_count() - before  # the .spec run: a cold user cache
    code, out, err = specir_cli("run", spec, "--prompt-ids", "5,6,7,8", "--max-new-tokens", 12, "--json")
    assert code == 0 and "compiling" not in err
    assert kernel_cache.compile_count() - before == compiled_once  # the second run compiled nothing


def test_cold_cache_compiles_with_a_progress_line(tmp_path, pair, specir_cli, monkeypatch):
    target, _ = pair
    spec = write_spec(tmp_path, "ar", target, "ngram", k=2)
    code, out, err = specir_cli("compile", spec, "--target", "cpu", "-o", tmp_path / "build")
    assert code == 0, err
    cold = tmp_path / "cold" / "tvm"
    shutil.copytree(tmp_path / "build" / "tvm", cold)
    for library in sorted(cold.glob("rms_norm-*.so")) + sorted(cold.glob("silu_mul-*.so")):
        library.unlink()  # two kernels the cache lacks
    monkeypatch.setenv("SPECIR_CACHE", str(cold.parent))
    before = kernel_cache.compile_count()
    code, out, err = specir_cli("run", spec, "--prompt-ids", "1,2,3", "--max-new-tokens", 4, "--json")
    assert code == 0, err
    assert kernel_cache.compile_count() - before == 2
    assert "compiling 2 TVM kernels" in err and "compiled 2 TVM kernels" in err


@pytest.fixture
def without_tvm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tvm", None)  # `import tvm` raises ImportError
    lowering.unavailable_reason.cache_clear()
    yield
    lowering.unavailable_reason.cache_clear()


def test_without_tvm_everything_runs_on_the_reference_backend(tmp_path, pair, specir_cli, without_tvm):
    target, _ = pair
    spec = write_spec(tmp_path, "ar", target, "ngram", k=2)
    code, out, err = specir_cli("run", spec, "--target", "cpu", "--prompt-ids", "1,2,3", "--max-new-tokens", 4,
                                "--json")
    assert code == 0, err
    assert json.loads(out)["backend"] == "reference"
    notes = [line for line in err.splitlines() if "tvm backend unavailable" in line]
    assert len(notes) == 1 and "Traceback" not in err
    code, out, err = specir_cli("compile", spec, "--target", "cpu", "-o", tmp_path / "build")
    assert code == 0 and "Traceback" not in err
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    assert manifest["backend"] == "reference"
    assert any("tvm backend unavailable" in note for note in manifest["notes"])
