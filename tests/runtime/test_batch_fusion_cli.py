"""`specir compile p.spec -p "tree-verify,batch-fusion"` on every Llama-family pair, and `specir check`
of the fused pipeline at batch sizes 1..8 with mixed prompt lengths: zero mismatches."""
from __future__ import annotations

import json

import pytest

from tests.helpers.checkpoints import FAMILIES
from tests.helpers.specs import write_prompts, write_spec


@pytest.mark.parametrize("family", FAMILIES)
def test_compile_tree_verify_batch_fusion_on_every_family(family, family_checkpoints, tmp_path, specir_cli):
    ckpt = family_checkpoints[family]
    spec = write_spec(tmp_path, family, ckpt, ckpt, k=3)
    code, out, err = specir_cli("compile", spec, "--target", "cpu", "-p", "tree-verify{budget=8,topk=2},batch-fusion",
                                "-o", tmp_path / "build")
    assert code == 0, err
    final = (tmp_path / "build" / "pipeline.spec").read_text()
    assert "verify.packed @target" in final and '"batch-fusion"' in final
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    assert "batch-fusion" in json.dumps(manifest)
    prompts = write_prompts(tmp_path, 6, 96, seed=11)
    code, out, err = specir_cli("check", tmp_path / "build", "--prompts", prompts, "--batch-size", 4,
                                "--max-new-tokens", 10, "--json", "--limit", 0)
    report = json.loads(out)
    assert code == 0 and report["mismatches"] == 0 and report["tokens_checked"] == 60, (report, err)


@pytest.mark.parametrize("batch", range(1, 9))
def test_check_fused_pipeline_at_batch_1_to_8(batch, pair, tmp_path, specir_cli):
    target, drafter = pair
    spec = write_spec(tmp_path, "fused", target, drafter, k=3,
                      passes="tree-verify{budget=12,topk=2},batch-fusion{budget=16}")
    prompts = write_prompts(tmp_path, 8, 259, seed=batch)  # 2 to 12 tokens each
    code, out, err = specir_cli("check", spec, "--prompts", prompts, "--batch-size", batch,
                                "--max-new-tokens", 12, "--json", "--limit", 0)
    report = json.loads(out)
    assert code == 0 and report["mismatches"] == 0 and report["tokens_checked"] == 8 * 12, (report, err)
