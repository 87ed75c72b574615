"""Every cheat is caught by `specir check`, on a build and with --plugin on a .spec.

The judge trusts nothing the candidate says: it reads the declared target (recorded before any
pass), generates in a child process (the only one that imports plugins) and token-forces against
the declared checkpoint, loaded fresh, in its own process."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.helpers.specs import write_prompts, write_spec

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
CHEATS = HELPERS / "cheats"
BROKEN = HELPERS / "broken_plugin.py"


@pytest.fixture(scope="module")
def far_pair(tmp_path_factory):
    """(target, drafter) sharing a tokenizer, the drafter an independent random model (it disagrees)."""
    root = tmp_path_factory.mktemp("far")
    target = make_checkpoint("llama", root / "target", seed=21, vocab_size=259, initializer_range=0.3)
    drafter = make_checkpoint("llama", root / "drafter", seed=22, vocab_size=259, initializer_range=0.3)
    for folder in (target, drafter):
        write_tokenizer(folder, 259)
    return target, drafter


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    return write_prompts(tmp_path_factory.mktemp("prompts"), 4, 259, seed=31)


def check(specir_cli, source, prompts, *extra):
    code, out, err = specir_cli("check", source, "--prompts", prompts, "--max-new-tokens", 12, "--limit", 0,
                                "--json", *extra)
    return code, (json.loads(out) if out.strip() else None), err


def plugin(name: str) -> str:
    return str(CHEATS / f"{name}.py")


def compile_apart(*argv) -> tuple[int, str]:
    """`specir compile` in its own process, as a user runs it: a plugin imported there must not
    leak into this test process (where `check` judges in-process)."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "specir.cli.main", "compile", *map(str, argv)],
                          capture_output=True, text=True)
    return proc.returncode, proc.stderr


def test_the_honest_pipeline_passes(specir_cli, far_pair, prompts, tmp_path):
    spec = write_spec(tmp_path, "chain", *far_pair, k=3)
    code, report, err = check(specir_cli, spec, prompts)
    assert code == 0, err
    assert report["ok"] and report["tokens_checked"] == report["tokens_asked"] == 48
    assert report["declared_target"]["model"] == "target"
    assert report["declared_target"]["source"] == str(far_pair[0].resolve())


@pytest.mark.parametrize("mode", ["drop-target", "redeclare", "resource"])
def test_verifying_with_a_copy_of_the_drafter_is_rejected(specir_cli, far_pair, prompts, tmp_path, mode):
    spec = write_spec(tmp_path, "chain", *far_pair, k=3)
    flags = ("--plugin", plugin("shadow_verify"), "-p", f"verify-with-shadow{{mode={mode}}}")
    code, report, err = check(specir_cli, spec, prompts, *flags)
    assert code != 0 and report is None, err
    assert {"drop-target": "declared target @target is not a model", "redeclare": "changed the declared target",
            "resource": "declares its target's checkpoint"}[mode] in err
    code, err = compile_apart(spec, "--target", "cpu", "-o", tmp_path / "b", *flags)
    assert code == 2 and not (tmp_path / "b").exists(), err


def test_a_build_rewritten_to_verify_with_the_drafter_is_judged_against_its_declared_target(
        specir_cli, far_pair, prompts, tmp_path):
    spec = write_spec(tmp_path, "chain", *far_pair, k=3)
    build = tmp_path / "build"
    assert specir_cli("compile", spec, "--target", "cpu", "-o", build)[0] == 0
    text = (build / "pipeline.spec").read_text()
    drafter = str(far_pair[1].resolve())
    from specir.importers.digest import checkpoint_digest
    start = text.index("target = {")
    end = text.index("}}", start) + 1
    fake = (f'target = {{digest = "{checkpoint_digest(drafter)}", dtype = "bf16", model = @drafter, '
            f'source = "{drafter}"}}')
    text = text[:start] + fake + text[end:]
    text = text.replace("verify.chain @target", "verify.chain @drafter")
    (build / "pipeline.spec").write_text(text)
    code, report, err = check(specir_cli, build, prompts)
    assert code == 1, err
    assert report["mismatches"] > 0 and report["declared_target"]["model"] == "target"
    # rewriting the manifest too: the source .spec still declares the real target
    manifest = json.loads((build / "manifest.json").read_text())
    manifest["declared_target"] = {"model": "drafter", "source": drafter, "digest": checkpoint_digest(drafter),
                                   "dtype": "bf16"}
    (build / "manifest.json").write_text(json.dumps(manifest))
    code, report, err = check(specir_cli, build, prompts)
    assert code == 2 and "now declares @target" in err, err


@pytest.mark.parametrize("which", ["trusting", "shifted", "no_correction"])
def test_broken_acceptance_and_commit_are_caught_on_a_build_and_with_a_plugin(
        specir_cli, far_pair, prompts, tmp_path, which):
    _caught_with_a_plugin_and_on_a_build(specir_cli, far_pair, prompts, tmp_path,
                                         ("--plugin", str(BROKEN), "-p", f"use-broken{{which={which}}}"))


def test_a_perturbed_target_graph_is_caught(specir_cli, far_pair, prompts, tmp_path):
    _caught_with_a_plugin_and_on_a_build(specir_cli, far_pair, prompts, tmp_path,
                                         ("--plugin", plugin("perturb_norm"), "-p", "perturb-norm"))


def _caught_with_a_plugin_and_on_a_build(specir_cli, far_pair, prompts, tmp_path, flags):
    """`check` fails with mismatches on the .spec run with `flags`, and on a build compiled with them."""
    spec = write_spec(tmp_path, "chain", *far_pair, k=3)
    code, report, err = check(specir_cli, spec, prompts, *flags)
    assert code == 1 and report["mismatches"] > 0, err
    build = tmp_path / "b"
    assert compile_apart(spec, "--target", "cpu", "-o", build, *flags)[0] == 0
    code, report, err = check(specir_cli, build, prompts)
    assert code == 1 and report["mismatches"] > 0, err


def test_a_plugin_that_patches_the_judge_at_import_changes_nothing_the_judge_runs(
        specir_cli, far_pair, prompts, tmp_path):
    spec = write_spec(tmp_path, "chain", *far_pair, k=3)
    code, report, err = check(specir_cli, spec, prompts, "--plugin", plugin("patch_judge"), "-p", "nothing-to-see")
    assert code == 1 and report["mismatches"] > 0 and report["reference"] == "transformers", err
    build = tmp_path / "b"
    assert compile_apart(spec, "--target", "cpu", "-o", build, "--plugin", plugin("patch_judge"))[0] == 0
    code, report, err = check(specir_cli, build, prompts)
    assert code == 1 and report["mismatches"] > 0, err


@pytest.mark.parametrize("none", [False, True])
def test_fewer_tokens_than_asked_fail(specir_cli, far_pair, prompts, tmp_path, none):
    spec = write_spec(tmp_path, "chain", *far_pair, k=3)
    flags = ("--plugin", plugin("short_output"), "-p", f"stop-early{{none={'true' if none else 'false'}}}")
    code, report, err = check(specir_cli, spec, prompts, *flags)
    assert code == 1 and not report["ok"], err
    assert report["tokens_asked"] == 48 and report["tokens_produced"] < 48
    assert any("asked for 48 tokens" in r for r in report["reasons"]), report["reasons"]
    if none:
        assert report["tokens_produced"] == 0 and report["mismatches"] == 0


def test_rewriting_the_checkpoint_while_generating_is_caught(specir_cli, far_pair, prompts, tmp_path):
    target, drafter = (shutil.copytree(p, tmp_path / p.name) for p in far_pair)
    spec = write_spec(tmp_path, "chain", Path(target), Path(drafter), k=3)
    code, report, err = check(specir_cli, spec, prompts, "--plugin", plugin("rewrite_checkpoint"),
                              "-p", "rewrite-checkpoint")
    assert code == 1 and any("changed while the pipeline ran" in r for r in report["reasons"]), err


def test_a_pipeline_process_that_exits_without_a_result_fails(specir_cli, far_pair, prompts, tmp_path):
    spec = write_spec(tmp_path, "chain", *far_pair, k=3)
    code, report, err = check(specir_cli, spec, prompts, "--plugin", plugin("exit_silently"), "-p", "exit-silently")
    assert code == 1 and any("without a result" in r for r in report["reasons"]), err


def test_nan_weights_fail_the_check_because_nothing_can_be_proved(specir_cli, far_pair, prompts, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file
    folder = Path(shutil.copytree(far_pair[0], tmp_path / "nan"))
    tensors = load_file(folder / "model.safetensors")
    tensors["model.norm.weight"] = torch.full_like(tensors["model.norm.weight"], float("nan"))
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    spec = write_spec(tmp_path, "ar", folder, "ngram", k=2)
    code, report, err = check(specir_cli, spec, prompts)
    assert code == 1 and report["non_finite"] > 0, err
    assert any("not finite" in r for r in report["reasons"])


def test_a_checkpoint_changed_after_init_is_refused(specir_cli, far_pair, tmp_path):
    folder = Path(shutil.copytree(far_pair[0], tmp_path / "t"))
    spec = write_spec(tmp_path, "ar", folder, "ngram", k=2)
    with open(folder / "config.json", "a") as f:
        f.write("\n")
    code, _, err = specir_cli("run", spec, "--prompt-ids", "1,2,3", "--max-new-tokens", 2)
    assert code == 2 and "changed since this pipeline was written" in err, err
