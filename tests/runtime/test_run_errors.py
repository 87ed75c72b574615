"""Bad input at run time: one clear error each, exit code 2, no traceback."""
from __future__ import annotations

import shutil

from tests.helpers.checkpoints import make_checkpoint
from tests.helpers.specs import write_spec


def assert_error(result, message):
    code, out, err = result
    assert code == 2, (code, err)
    assert message in err and "Traceback" not in err, err
    assert "hint:" in err or "error:" in err


def test_prompt_longer_than_context(tmp_path, specir_cli):
    target = make_checkpoint("llama", tmp_path / "short", max_position_embeddings=16)
    spec = write_spec(tmp_path, "p", target)
    ids = ",".join(str(i % 90) for i in range(20))
    assert_error(specir_cli("run", spec, "--prompt-ids", ids), "prompt 0 has 20 tokens; the target's context is 16")


def test_max_new_tokens_past_the_cache(tmp_path, specir_cli):
    target = make_checkpoint("llama", tmp_path / "short", max_position_embeddings=16)
    spec = write_spec(tmp_path, "p", target)
    assert_error(specir_cli("run", spec, "--prompt-ids", "1,2,3", "--max-new-tokens", 20),
                 "exceeds the target's context of 16")


def test_drafter_with_a_different_vocabulary(tmp_path, specir_cli, pair):
    target, _ = pair
    other = make_checkpoint("llama", tmp_path / "other", vocab_size=100)
    spec = tmp_path / "mixed.spec"
    spec.write_text(f'pipeline mixed {{\n  model @target = import("{target}")\n  model @drafter = import("{other}")\n'
                    "  step(%ctx: context) {\n    %d = draft.chain @drafter, %ctx {k = 2}\n"
                    "    %lg = verify.chain @target, %ctx, %d\n    %a = accept.greedy %d, %lg\n"
                    "    commit %ctx, %a\n  }\n}\n")
    assert_error(specir_cli("run", spec, "--prompt-ids", "1,2"), "@drafter has vocabulary 100 but @target has 259")


def test_empty_prompt(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    assert_error(specir_cli("run", spec, "--prompt-ids", ""), "prompt 0 is empty")
    assert_error(specir_cli("run", spec, "--prompt", ""), "prompt 0 is empty")


def test_prompt_ids_outside_the_vocabulary(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    assert_error(specir_cli("run", spec, "--prompt-ids", "1,999"), "outside the target's vocabulary of 259")


def test_weights_missing_at_run_time(tmp_path, specir_cli, pair):
    folder = tmp_path / "gone"
    shutil.copytree(pair[0], folder)
    spec = write_spec(tmp_path, "p", folder)
    code, out, err = specir_cli("compile", spec, "--target", "cpu", "-o", tmp_path / "build")
    assert code == 0, err
    (folder / "model.safetensors").unlink()
    assert_error(specir_cli("run", tmp_path / "build", "--prompt-ids", "1,2"), "holds no *.safetensors weights")


def test_gpu_target_on_a_cpu_machine(tmp_path, specir_cli, pair, monkeypatch):
    import torch
    if torch.cuda.is_available():
        return
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # with it, GPU targets run in Triton's interpreter
    spec = write_spec(tmp_path, "p", pair[0])
    code, _, err = specir_cli("run", spec, "--target", "h200", "--prompt-ids", "1,2")
    assert_error((code, "", err), "target h200 needs an NVIDIA GPU, and this machine has none")
    assert "TRITON_INTERPRET=1" in err


def test_bad_prompts_file(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt_ids": [1, 2]}\n{"prompt_ids": [1, 2\n')
    code, out, err = specir_cli("check", spec, "--prompts", bad)
    assert code == 2 and f"{bad}:2:" in err and "invalid JSON" in err


def test_temperature_must_be_finite(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    for value in ("nan", "inf", "-1"):
        assert_error(specir_cli("run", spec, "--prompt-ids", "1,2", f"--temperature={value}"),
                     "--temperature must be a finite number >= 0")


def test_bench_bad_batch_sizes_and_out(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [1, 2, 3]}\n')
    common = ("bench", spec, "--target", "cpu", "--prompts", prompts, "--max-new-tokens", 2)
    assert_error(specir_cli(*common, "--batch-size", "1,x"), "--batch-size must be comma-separated integers")
    assert_error(specir_cli(*common, "--batch-size", ","), "--batch-size names no batch size")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert_error(specir_cli(*common, "--out", afile), "is a file, not a folder")
    assert afile.read_text() == "mine"
    assert_error(specir_cli(*common, "--out", afile / "sub"), "cannot create --out folder")


def test_negative_limit_and_bad_tolerance(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [1, 2, 3]}\n{"prompt_ids": [4, 5]}\n')
    for cmd in ("check", "bench"):
        assert_error(specir_cli(cmd, spec, "--prompts", prompts, "--limit", "-1"), "--limit must be 0")
    for value in ("nan", "-1"):
        assert_error(specir_cli("check", spec, "--prompts", prompts, f"--tolerance={value}"),
                     "--tolerance must be a finite number >= 0")


def test_prompt_past_the_context_names_its_line_not_its_batch_slot(tmp_path, specir_cli):
    target = make_checkpoint("llama", tmp_path / "short", max_position_embeddings=16)
    spec = write_spec(tmp_path, "p", target)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [1]}\n{"prompt_ids": [2]}\n\n{"prompt_ids": [3]}\n'
                       '{"prompt_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]}\n')
    for cmd in ("check", "bench"):
        code, out, err = specir_cli(cmd, spec, "--prompts", prompts, "--batch-size", "2", "--max-new-tokens", "4")
        assert code == 2 and "Traceback" not in err, err
        assert err.startswith(f"{prompts}:5: error: the prompt has 14 tokens"), err
        assert "use --max-new-tokens 2 or less" in err
