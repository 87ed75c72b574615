"""Every GPU pipeline the README shows (`specir compile ... --target h200 -p "..."`, read from the
README itself, plugin examples aside: tests/step/test_custom_step_op_example.py runs that one)
compiles for the H200 and passes `specir check` at batch 3 (prompts of different lengths) on a small pair: the Triton
backend's device step, compiled on a GPU, under TRITON_INTERPRET=1 without one."""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import torch

from tests.helpers.specs import write_prompts, write_spec

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_gpu_pipelines() -> list[str]:
    """The -p argument of each README `specir compile` line that targets a GPU without a plugin."""
    found = []
    for line in README.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line.startswith("specir compile") or "--plugin" in line:
            continue
        argv = shlex.split(line)
        if argv[argv.index("--target") + 1] in ("h100", "h200", "a100") and "-p" in argv:
            found.append(argv[argv.index("-p") + 1])
    return found


def test_the_readme_shows_gpu_pipelines():
    assert len(readme_gpu_pipelines()) >= 2, "the README's GPU section lost its compile lines"


@pytest.mark.parametrize("passes", readme_gpu_pipelines())
def test_a_readme_gpu_pipeline_compiles_and_passes_check(passes, pair, tmp_path, specir_cli, monkeypatch):
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = write_spec(tmp_path, "p", pair[0], pair[1], k=3, dtype="f32")
    build = tmp_path / "build"
    code, _, err = specir_cli("compile", spec, "--target", "h200", "-p", passes, "-o", build)
    assert code == 0, err
    prompts = write_prompts(tmp_path, 3, 259, seed=int.from_bytes(os.urandom(2), "little"))
    for batch in (3,):
        code, out, err = specir_cli("check", build, "--prompts", prompts, "--max-new-tokens", 6,
                                    "--batch-size", batch)
        assert code == 0, f"{passes} at batch {batch}: {err}{out}"
        assert re.search(r"\b0 mismatches\b", out + err), out + err
