"""Input that used to be accepted silently (exit 0, no message) or crash with an internal error:
now one located message with a hint, exit 2 (issue 11, "Accepted silently" and "Internal errors")."""
from __future__ import annotations

import json
import shutil
import struct

import pytest

from tests.harden.conftest import assert_error
from tests.helpers.specs import write_spec

STEP = """  step(%ctx: context) {
    %d = draft.ngram %ctx {k = 3}
    %lg = verify.chain @target, %ctx, %d
    %acc = accept.greedy %d, %lg
    commit %ctx, %acc
  }
"""


def _edited(tmp_path, spec, old: str, new: str, count: int = 1):
    """`spec` with the first `count` occurrences of `old` replaced; returns (path, line of the first)."""
    text = spec.read_text()
    assert old in text, old
    line = text[:text.index(old)].count("\n") + 1
    path = tmp_path / "edited.spec"
    path.write_text(text.replace(old, new, count))
    return path, line


# ---------------------------------------------------------------------- model-graph attributes

@pytest.mark.parametrize("old, new, message", [
    ("layer = 1}", "layer = 99}", "KV-cache layer 99 is out of range: @target has 2 layers, numbered 0 to 1"),
    ("layer = 1}", "layer = 0}", "KV-cache layer 0 of @target is written by two ops (the first at line"),
    ("layer = 1}", "layer = -1}", "attribute 'layer' of attention must be >= 0, got -1"),
    ("eps = 1e-06", "eps = nan", "attribute 'eps' of rms_norm: nan is not a finite number"),
    ("eps = 1e-06", "eps = -1.0", "attribute 'eps' of rms_norm must be > 0, got -1.0"),
    ("theta = 500000.0", "theta = inf", "attribute 'rope' of rope: inf is not a finite number"),
    ("theta = 500000.0", "theta = -5.0", "rope: rope theta must be a finite number > 0, got -5.0"),
    ("heads = 4", "heads = 0", "attribute 'heads' of attention must be >= 1, got 0"),
    ("layer = 1}", "layer = 100000000000000000000000000000}", "attribute 'layer' of attention: integer "
                                                               "100000000000...(30 digits) does not fit in 64 bits"),
])
def test_bad_model_graph_attribute(tmp_path, specir_cli, pair, old, new, message):
    spec = write_spec(tmp_path, "p", pair[0])
    path, line = _edited(tmp_path, spec, old, new)
    assert_error(specir_cli("opt", path), message, f"{path}:")


def test_two_attention_ops_with_one_layer_point_at_the_second(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    path, line = _edited(tmp_path, spec, "layer = 1}", "layer = 0}")
    err = assert_error(specir_cli("compile", path, "--target", "cpu", "-o", tmp_path / "b"),
                       "written by two ops", f"{path}:{line}:", "%l1.attn = attention", hint="number them 0, 1")
    assert not (tmp_path / "b").exists()
    assert err


def test_negative_weight_dims(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    text = spec.read_text()
    shape = text.split('weight "model.norm.weight" : ')[1].split("\n")[0]
    path, line = _edited(tmp_path, spec, f'weight "model.norm.weight" : {shape}', 'weight "model.norm.weight" : bf16[-64]')
    assert_error(specir_cli("opt", path), "weight 'model.norm.weight' has dimension -64: dimensions must be positive",
                 f"{path}:{line}:", 'weight "model.norm.weight"', hint="checkpoint tensor's shape")


def test_weight_declared_f32_for_a_bf16_tensor(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    path, line = _edited(tmp_path, spec, 'weight "model.norm.weight" : bf16[', 'weight "model.norm.weight" : f32[')
    for argv in (("compile", path, "--target", "cpu", "-o", tmp_path / "b"), ("run", path, "--prompt-ids", "1,2")):
        assert_error(specir_cli(*argv), "weight 'model.norm.weight' of @target is declared f32[64], but "
                     "model.safetensors holds it as bf16", f"{path}:{line}:", hint="declare it bf16[64]")


def test_pipeline_without_a_step(tmp_path, specir_cli, pair):
    spec = write_spec(tmp_path, "p", pair[0])
    text = spec.read_text()
    path = tmp_path / "nostep.spec"
    path.write_text(text[:text.index("  step(")] + "}\n")
    assert specir_cli("opt", path)[0] == 0  # a pipeline of models only is valid IR
    for argv in (("compile", path, "--target", "cpu", "-o", tmp_path / "b"), ("run", path, "--prompt-ids", "1,2"),
                 ("opt", path, "-p", "canonicalize")):
        assert_error(specir_cli(*argv), "pipeline p has no step", f"{path}:1:1", hint="step(%ctx: context)")


# ---------------------------------------------------------------------- step attributes and pass options

@pytest.mark.parametrize("attrs, message", [
    ("k = 100000000000000000000000000000", "attribute 'k' of draft.ngram: integer 100000000000...(30 digits) "
                                           "does not fit in 64 bits"),
    ("k = 100000", "draft.ngram: k must be at most 1024, got 100000"),
    ("k = 3, max_ngram = 5000", "draft.ngram: max_ngram must be at most 1024, got 5000"),
])
def test_step_attribute_out_of_range(tmp_path, specir_cli, family_checkpoints, attrs, message):
    p = tmp_path / "p.spec"
    p.write_text(f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n'
                 + STEP.replace("{k = 3}", "{" + attrs + "}") + "}\n")
    assert_error(specir_cli("opt", p), message, f"{p}:4:5", "%d = draft.ngram")


@pytest.mark.parametrize("options, message, col", [
    ("topk=100000,budget=100000", "option 'topk' of pass tree-verify must be an integer >= 1 and <= 1024, got '100000'", 13),
    ("budget=100000000000000000000000000000", "option 'budget' of pass tree-verify must be an integer >= 1 and <= 4096", 13),
    ("topk=300", "topk 300 is more than the drafter's vocabulary of 259 tokens", 13),
    ("expand=dynamic,threshold=nan", "option 'threshold' of pass tree-verify must be a finite number >= 0.0 "
                                     "and <= 1.0, got 'nan'", 28),
    ("expand=dynamic,threshold=2.5", "option 'threshold' of pass tree-verify must be a finite number >= 0.0 and <= 1.0, got '2.5'", 28),
    ("budget={32}", "pass options cannot nest '{'", 20),
])
def test_tree_verify_options_out_of_range(tmp_path, specir_cli, pair, options, message, col):
    target, drafter = pair
    p = write_spec(tmp_path, "p", target, drafter)
    assert_error(specir_cli("opt", p, "-p", "tree-verify{" + options + "}"), message, f"-p:1:{col}")


def test_draft_tree_topk_past_the_vocabulary_in_the_ir(tmp_path, specir_cli, pair):
    target, drafter = pair
    p = write_spec(tmp_path, "p", target, drafter, passes="tree-verify")
    path, line = _edited(tmp_path, p, "topk = 4", "topk = 500") if "topk = 4" in p.read_text() else \
        _edited(tmp_path, p, "draft.tree @drafter, %ctx {", "draft.tree @drafter, %ctx {topk = 500, ")
    assert_error(specir_cli("opt", path), "topk 500 is more than the drafter's vocabulary of 259 tokens", f"{path}:")


def test_huge_seed_and_init_values(specir_cli, tmp_path, ngram_spec, family_checkpoints):
    assert_error(specir_cli("run", ngram_spec, "--prompt-ids", "1,2", "--seed", str(10**30)),
                 "--seed must be from 0 to 2**64 - 1", hint="--seed 0")
    assert_error(specir_cli("init", "--target-model", family_checkpoints["llama"], "--k", str(10**30)),
                 "--k must be at most 1024, got 100000000000... (31 digits)", hint="--k 4")
    assert_error(specir_cli("init", "--target-model", ""), "--target-model is empty",
                 hint="leave the flag out for the zoo pair")
    assert_error(specir_cli("init", "--drafter", ""), "--drafter is empty")


def test_init_name_error_points_at_the_flag(specir_cli, family_checkpoints):
    err = assert_error(specir_cli("init", "--target-model", family_checkpoints["llama"], "--name", "bad name"),
                       "--name 'bad name' is not a pipeline name", "command line:1:", "bad name", hint="ASCII")
    assert "<init>" not in err


# ---------------------------------------------------------------------- config.json and safetensors

@pytest.mark.parametrize("key, value, message", [
    ("num_hidden_layers", -2, "config.json: 'num_hidden_layers' must be an integer from 1 to 2147483647, got -2"),
    ("hidden_size", "64", "config.json: 'hidden_size' must be an integer from 1 to 2147483647, got '64' (a string)"),
    ("rms_norm_eps", "1e-6", "config.json: 'rms_norm_eps' must be a finite number > 0, got '1e-6' (a string)"),
    ("vocab_size", 1.5, "config.json: 'vocab_size' must be an integer from 1 to 2147483647, got 1.5"),
    ("tie_word_embeddings", "yes", "config.json: 'tie_word_embeddings' must be true or false, got 'yes'"),
    ("rope_parameters", {"rope_type": "default", "rope_theta": "big"},
     "config.json: 'rope_parameters.rope_theta' must be a finite number > 0, got 'big'"),
    ("num_key_value_heads", 3, "num_attention_heads (4) is not a multiple of num_key_value_heads (3)"),
    ("model_type", ["llama"], "model_type ['llama'] is not supported"),
])
def test_bad_config_values_name_the_key(tmp_path, specir_cli, family_checkpoints, key, value, message):
    folder = tmp_path / "ck"
    shutil.copytree(family_checkpoints["llama"], folder)
    config = json.loads((folder / "config.json").read_text())
    config[key] = value
    (folder / "config.json").write_text(json.dumps(config))
    p = tmp_path / "p.spec"
    p.write_text(f'pipeline p {{\n  model @target = import("{folder}")\n{STEP}}}\n')
    assert_error(specir_cli("opt", p), message, f"{p}:2:3", "model @target")
    assert_error(specir_cli("init", "--target-model", folder), message)


def _header(file):
    raw = file.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    return raw, size, json.loads(raw[8:8 + size])


@pytest.mark.parametrize("damage", ["cut", "offsets"])
def test_truncated_safetensors_found_at_init_and_compile(tmp_path, specir_cli, pair, damage):
    folder = tmp_path / "ck"
    shutil.copytree(pair[0], folder)
    spec = write_spec(tmp_path, "p", folder)  # written while the checkpoint was whole
    file = folder / "model.safetensors"
    raw, size, header = _header(file)
    if damage == "cut":
        file.write_bytes(raw[: len(raw) // 2])
        message = "model.safetensors is truncated: tensor"
    else:
        name = next(n for n in header if n != "__metadata__")
        header[name]["data_offsets"] = [header[name]["data_offsets"][0], len(raw) * 2]
        new = json.dumps(header).encode()
        new += b" " * (-len(new) % 8)
        file.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + size:])
        message = "model.safetensors is corrupt: tensor"
    assert_error(specir_cli("init", "--target-model", folder), message if damage == "cut" else "past its end",
                 hint="re-save")
    for argv in (("compile", spec, "--target", "cpu", "-o", tmp_path / "b"), ("run", spec, "--prompt-ids", "1,2")):
        assert_error(specir_cli(*argv), "past its end", f"{spec}:", hint="re-save")


# ---------------------------------------------------------------------- prompts

def test_prompts_line_with_both_prompt_and_ids(tmp_path, specir_cli, ngram_spec):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [1, 2]}\n{"prompt": "x", "prompt_ids": [1, 2]}\n')
    assert_error(specir_cli("check", ngram_spec, "--prompts", prompts),
                 "a prompt line gives both `prompt` and `prompt_ids`", f"{prompts}:2:1", hint="keep one")


def test_prompt_with_a_lone_surrogate(tmp_path, specir_cli, ngram_spec):
    assert_error(specir_cli("run", ngram_spec, "--prompt", "def f(\udcff):"),
                 "--prompt is not valid Unicode text: a lone surrogate '\\udcff' at character 6", hint="--prompt-ids")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "ok"}\n{"prompt": "bad \\ud800 text"}\n')
    assert_error(specir_cli("check", ngram_spec, "--prompts", prompts), "the prompt is not valid Unicode text",
                 f"{prompts}:2:1")


@pytest.mark.parametrize("kind", ["folder", "binary", "latin1"])
def test_prompts_that_are_not_a_text_file(tmp_path, specir_cli, ngram_spec, kind):
    prompts = tmp_path / "p.jsonl"
    if kind == "folder":
        prompts.mkdir()
        message, where = "--prompts", str(prompts)
        message = f"--prompts '{prompts}' is a folder, not a prompts file"
    elif kind == "binary":
        prompts.write_bytes(b'{"prompt_ids": [1]}\n\x00\x01\xff\xfe')
        message, where = "is a binary file: byte 0xff at line 2, column 3 (offset 22)", f"{prompts}:2:3"
    else:
        prompts.write_bytes('{"prompt": "caf\u00e9"}\n'.encode("latin-1"))
        message, where = "is not UTF-8 text: byte 0xe9 at line 1, column 16 (offset 15)", f"{prompts}:1:16"
    assert_error(specir_cli("check", ngram_spec, "--prompts", prompts), message, where, hint="JSONL")


# ---------------------------------------------------------------------- found by the fuzz harness (tests/fuzz)

@pytest.mark.parametrize("old, new, message", [
    ("high_freq_factor = 4.0", "high_freq_factor = 0", "rope type 'llama3' needs high_freq_factor > 0"),
    ("low_freq_factor = 1.0", "low_freq_factor = 4.0", "rope type 'llama3' needs low_freq_factor != high_freq_factor"),
    ('type = "llama3"', 'type = "llama4"', "unknown rope type 'llama4'"),
    ("max_position = 512", "max_position = 1e309", "attribute 'max_position' of @target: inf is not a finite number"),
    ("max_position = 512", "max_position = 0", "attribute 'max_position' of @target: must be >= 1, got 0"),
    ('@target attributes {dtype = "bf16"', '@target attributes {dtype = "f64"',
     "attribute 'dtype' of @target: must be one of ['bf16', 'f16', 'f32']"),
    ("max_position = 512", "eos = 5, max_position = 512", "attribute 'eos' of @target: must be a list"),
])
def test_bad_rope_and_model_attributes(tmp_path, specir_cli, pair, old, new, message):
    spec = write_spec(tmp_path, "p", pair[0])
    path, _ = _edited(tmp_path, spec, old, new)
    assert_error(specir_cli("run", path, "--prompt-ids", "1,2", "--max-new-tokens", 2), message, f"{path}:")


def test_null_config_values_mean_the_defaults(tmp_path, specir_cli, family_checkpoints):
    folder = tmp_path / "ck"
    shutil.copytree(family_checkpoints["qwen2"], folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(rms_norm_eps=None, rope_theta=None, rope_parameters=None)
    (folder / "config.json").write_text(json.dumps(config))
    code, out, err = specir_cli("init", "--target-model", folder)
    assert code == 0 and "eps = 1e-06" in out and "theta = 10000.0" in out, err


def test_blank_pass_strings_run_no_pass(specir_cli, ngram_spec):
    for passes in (" ", "canonicalize, "):
        code, out, err = specir_cli("opt", ngram_spec, "-p", passes)
        assert code == 0, err
