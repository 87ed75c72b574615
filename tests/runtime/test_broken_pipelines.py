"""The guard can fail: deliberately broken pipelines are each caught by `specir check`, and a pass
that changes the target's graph (what runs is what the IR says) is caught too."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.specs import write_prompts, write_spec

PLUGIN = Path(__file__).resolve().parents[1] / "helpers" / "broken_plugin.py"


def _check(specir_cli, spec, prompts, *extra):
    code, out, err = specir_cli("check", spec, "--prompts", prompts, "--max-new-tokens", 16, "--json",
                                "--limit", 0, "--plugin", PLUGIN, *extra)
    return code, json.loads(out) if out.strip() else None, err


@pytest.mark.parametrize("which", ["trusting", "shifted", "no_correction"])
def test_broken_pipeline_is_caught(which, tmp_path, pair, specir_cli):
    target, drafter = pair
    spec = write_spec(tmp_path, "chain", target, drafter, k=4)
    prompts = write_prompts(tmp_path, 6, 259, seed=11)
    code, report, err = _check(specir_cli, spec, prompts)
    assert code == 0 and report["mismatches"] == 0, err  # the intact pipeline passes
    code, report, err = _check(specir_cli, spec, prompts, "-p", f"use-broken{{which={which}}}")
    assert code == 1, err
    assert report["mismatches"] > 0


def test_pass_that_changes_the_target_graph_changes_execution_and_is_caught(tmp_path, pair, specir_cli):
    """A plugin pass drops the last decoder layer of the target: the engine runs the rewritten IR
    (different tokens), and token forcing against the stock target rejects it."""
    plugin = tmp_path / "skip_layer.py"
    plugin.write_text('''
import re
from dataclasses import replace
from specir.pass_infra import Pass

class SkipLastLayer(Pass):
    name = "skip-last-layer"

    def run(self, pipeline):
        model = pipeline.model("target")
        layer_of = lambda op: re.match(r"%l(\\d+)\\.", op.result or "")  # noqa: E731
        ops = list(model.graph.ops)
        last = max(int(layer_of(op).group(1)) for op in ops if layer_of(op))
        keep = [op for op in ops if not (op.result or "").startswith(f"%l{last}.")]
        final = keep[-2]  # the final norm reads the skipped layer's output: rewire it
        keep[-2] = replace(final, operands=(f"%l{last - 1}.out",))
        graph = replace(model.graph, ops=tuple(keep))
        return pipeline.with_model(replace(model, graph=graph))
''')
    target, drafter = pair
    spec = write_spec(tmp_path, "ar", target, "ngram", k=2)
    prompts = write_prompts(tmp_path, 4, 259, seed=12)
    base = specir_cli("run", spec, "--prompt-ids", "5,6,7,8", "--max-new-tokens", 12, "--json")
    cut = specir_cli("run", spec, "--prompt-ids", "5,6,7,8", "--max-new-tokens", 12, "--json",
                     "--plugin", plugin, "-p", "skip-last-layer,canonicalize")
    assert base[0] == 0 and cut[0] == 0, cut[2]
    assert json.loads(base[1])["tokens"] != json.loads(cut[1])["tokens"]
    code, out, err = specir_cli("check", spec, "--prompts", prompts, "--max-new-tokens", 12, "--json",
                                "--plugin", plugin, "-p", "skip-last-layer,canonicalize")
    assert code == 1 and json.loads(out)["mismatches"] > 0
