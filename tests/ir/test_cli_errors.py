"""One clear error per bad-input kind: message, file:line:col with the offending line and a caret,
a hint, exit code 2, and no traceback."""
from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

GOOD_STEP = """  step(%ctx: context) {
    %d = draft.ngram %ctx {k = 3}
    %lg = verify.chain @target, %ctx, %d
    %acc = accept.greedy %d, %lg
    commit %ctx, %acc
  }
"""


def spec(tmp_path, body: str, name="p.spec") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def assert_error(result, message: str, where: str | None = None, caret_under: str | None = None):
    code, out, err = result
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    assert message in err, err
    first = err.splitlines()[0]
    if where:
        assert first.startswith(where), first
    assert "error:" in first
    if caret_under is not None:
        lines = err.splitlines()
        idx = next(i for i, line in enumerate(lines) if line.strip().startswith("^"))
        col = lines[idx].index("^")
        assert lines[idx - 1][col:].startswith(caret_under), (lines[idx - 1], col)
    return err


def test_syntax_error(tmp_path, specir_cli):
    p = spec(tmp_path, "pipeline p {\n  step(%ctx: context) {\n    %x = = commit\n  }\n}\n")
    err = assert_error(specir_cli("opt", p), "syntax error: unexpected '='", f"{p}:3:10", "= commit")
    assert "hint: expected" in err


def test_unknown_op(tmp_path, specir_cli, family_checkpoints):
    body = f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n' + \
        GOOD_STEP.replace("draft.ngram", "draft.ngarm") + "}\n"
    err = assert_error(specir_cli("opt", spec(tmp_path, body)), "unknown op 'draft.ngarm'", None, "%d = draft.ngarm")
    assert "did you mean 'draft.ngram'" in err


def test_unknown_pass(tmp_path, specir_cli, family_checkpoints):
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n{GOOD_STEP}}}\n')
    err = assert_error(specir_cli("opt", p, "-p", "canonicalize,tree-verfy"), "unknown pass 'tree-verfy'", "-p:1:14",
                       "tree-verfy")
    assert "did you mean 'tree-verify'" in err


def test_unknown_option(tmp_path, specir_cli, family_checkpoints):
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n{GOOD_STEP}}}\n')
    err = assert_error(specir_cli("opt", p, "-p", "tree-verify{bugdet=8}"), "unknown option 'bugdet'", "-p:1:13",
                       "bugdet")
    assert "budget" in err


def test_wrong_option_type(tmp_path, specir_cli, family_checkpoints):
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n{GOOD_STEP}}}\n')
    assert_error(specir_cli("opt", p, "-p", "tree-verify{budget=lots}"),
                 "option 'budget' of pass tree-verify must be an integer >= 1 and <= 4096, got 'lots'", "-p:1:13", "budget=lots")


def test_undefined_value(tmp_path, specir_cli, family_checkpoints):
    body = f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n' + \
        GOOD_STEP.replace("accept.greedy %d, %lg", "accept.greedy %d, %logits") + "}\n"
    assert_error(specir_cli("opt", spec(tmp_path, body)), "value %logits is used before it is defined",
                 None, "%acc = accept.greedy")


def test_type_mismatch(tmp_path, specir_cli, family_checkpoints):
    body = f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n' + \
        GOOD_STEP.replace("%lg = verify.chain @target, %ctx, %d", "%lg = verify.chain @target, %ctx, %d : tree") + "}\n"
    p = spec(tmp_path, body)
    assert_error(specir_cli("opt", p), "type mismatch: %lg is declared tree, but verify.chain gives logits",
                 f"{p}:5:5")


def test_operand_type_mismatch(tmp_path, specir_cli, family_checkpoints):
    body = f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n' + \
        GOOD_STEP.replace("accept.greedy %d, %lg", "accept.greedy %lg, %d") + "}\n"
    assert_error(specir_cli("opt", spec(tmp_path, body)), "operand draft of accept.greedy must be tokens or tree")


def test_missing_checkpoint_folder(tmp_path, specir_cli):
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{tmp_path}/nowhere")\n{GOOD_STEP}}}\n')
    assert_error(specir_cli("opt", p), "does not exist", f"{p}:2:3", "model @target")
    assert_error(specir_cli("init", "--target-model", tmp_path / "nowhere"), "does not exist")


@pytest.mark.parametrize("content, message", [(None, "has no config.json"),
                                              ("{ not json", "config.json is not valid JSON (line 1, column 3)")])
def test_missing_or_corrupt_config(tmp_path, specir_cli, family_checkpoints, content, message):
    folder = tmp_path / "ck"
    shutil.copytree(family_checkpoints["llama"], folder)
    if content is None:
        (folder / "config.json").unlink()
    else:
        (folder / "config.json").write_text(content)
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{folder}")\n{GOOD_STEP}}}\n')
    err = assert_error(specir_cli("opt", p), message, f"{p}:2:3")
    assert "hint:" in err


def _rewrite_header(file: Path, edit) -> None:
    raw = file.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    edit(header)
    new = json.dumps(header).encode()
    new += b" " * (-len(new) % 8)
    file.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + size:])


@pytest.mark.parametrize("kind", ["missing", "shape"])
def test_safetensors_missing_weight_or_wrong_shape(tmp_path, specir_cli, family_checkpoints, kind):
    folder = tmp_path / "ck"
    shutil.copytree(family_checkpoints["llama"], folder)
    name = "model.layers.1.mlp.up_proj.weight"

    def edit(header):
        if kind == "missing":
            header["renamed.weight"] = header.pop(name)
        else:
            header[name]["shape"] = list(reversed(header[name]["shape"]))
    _rewrite_header(folder / "model.safetensors", edit)
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{folder}")\n{GOOD_STEP}}}\n')
    message = f"the checkpoint has no tensor {name!r}" if kind == "missing" else \
        f"tensor {name!r} has shape [64, 112] in model.safetensors, but config.json implies [112, 64]"
    assert_error(specir_cli("opt", p), message, f"{p}:2:3")


def test_unknown_target(tmp_path, specir_cli, family_checkpoints):
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n{GOOD_STEP}}}\n')
    err = assert_error(specir_cli("compile", p, "--target", "h800", "-o", tmp_path / "b"), "unknown target 'h800'")
    assert "h200" in err
    err = assert_error(specir_cli("compile", p, "--target", "CPU", "-o", tmp_path / "b"), "unknown target 'CPU'")
    assert "did you mean 'cpu'?" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permissions; covered by the not-a-build case below")
def test_unreadable_output_folder(tmp_path, specir_cli, family_checkpoints):
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n{GOOD_STEP}}}\n')
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        assert_error(specir_cli("compile", p, "--target", "cpu", "-o", locked / "b"), "permission denied")
    finally:
        locked.chmod(0o755)


def test_output_folder_that_cannot_be_created(tmp_path, specir_cli, family_checkpoints):
    """Works as root too (where permission bits are ignored): a parent that is a file."""
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n{GOOD_STEP}}}\n')
    afile = tmp_path / "plain.txt"
    afile.write_text("x")
    assert_error(specir_cli("compile", p, "--target", "cpu", "-o", afile / "sub" / "build"),
                 f"cannot create '{afile}/sub/build': '{afile}' is a file, not a folder")


def test_output_folder_that_is_a_file_or_foreign(tmp_path, specir_cli, family_checkpoints):
    p = spec(tmp_path, f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n{GOOD_STEP}}}\n')
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert_error(specir_cli("compile", p, "--target", "cpu", "-o", afile), "is a file, not a folder")
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me")
    assert_error(specir_cli("compile", p, "--target", "cpu", "-o", foreign), "is not a specir build")
    assert (foreign / "todo.txt").read_text() == "keep me"
    assert afile.read_text() == "mine"


def test_vocabularies_differ(tmp_path, specir_cli, family_checkpoints):
    from tests.helpers.checkpoints import make_checkpoint
    other = make_checkpoint("llama", tmp_path / "big_vocab", vocab_size=128)
    err = assert_error(specir_cli("init", "--target-model", family_checkpoints["llama"], "--drafter", other),
                       "@drafter has vocabulary 128 but @target has 96")
    assert "hint:" in err


def test_tokenizers_differ(tmp_path, specir_cli, pair):
    target, drafter = pair
    other = tmp_path / "other"
    shutil.copytree(drafter, other)
    data = json.loads((other / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    a, b = list(vocab)[10:12]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (other / "tokenizer.json").write_text(json.dumps(data))
    assert_error(specir_cli("init", "--target-model", target, "--drafter", other),
                 "the drafter's tokenizer differs from the target's")


def test_missing_spec_file(tmp_path, specir_cli):
    assert_error(specir_cli("opt", tmp_path / "none.spec"), "no such file")


def test_debug_shows_traceback(tmp_path):
    from specir.cli.main import main
    from specir.errors import SpecirError
    with pytest.raises(SpecirError):
        main(["--debug", "opt", str(tmp_path / "none.spec")])


@pytest.mark.parametrize("attrs, message", [
    ("k = 0", "draft.ngram: k must be at least 1, got 0"),
    ("k = -3", "draft.ngram: k must be at least 1, got -3"),
    ("k = 3, min_ngram = 0", "need 1 <= min_ngram <= max_ngram, got min_ngram = 0, max_ngram = 3"),
    ("k = 3, min_ngram = 4", "need 1 <= min_ngram <= max_ngram, got min_ngram = 4, max_ngram = 3"),
])
def test_draft_attribute_out_of_range(tmp_path, specir_cli, family_checkpoints, attrs, message):
    body = f'pipeline p {{\n  model @target = import("{family_checkpoints["llama"]}")\n' + \
        GOOD_STEP.replace("{k = 3}", "{" + attrs + "}") + "}\n"
    p = spec(tmp_path, body)
    assert_error(specir_cli("opt", p), message, f"{p}:4:5", "%d = draft.ngram")


def test_draft_chain_k_out_of_range(tmp_path, specir_cli, family_checkpoints):
    ckpt = family_checkpoints["llama"]
    body = (f'pipeline p {{\n  model @target = import("{ckpt}")\n  model @drafter = import("{ckpt}")\n'
            "  step(%ctx: context) {\n    %d = draft.chain @drafter, %ctx {k = -1}\n"
            "    %lg = verify.chain @target, %ctx, %d\n    %acc = accept.greedy %d, %lg\n    commit %ctx, %acc\n  }\n}\n")
    p = spec(tmp_path, body)
    assert_error(specir_cli("opt", p), "draft.chain: k must be at least 1, got -1", f"{p}:5:5")


@pytest.mark.parametrize("options, message, col", [
    ("budget=0", "option 'budget' of pass tree-verify must be an integer >= 1 and <= 4096, got '0'", 13),
    ("topk=3,depth=-1", "option 'depth' of pass tree-verify must be an integer >= 0 and <= 1024, got '-1'", 20),
    ("topk=-2", "option 'topk' of pass tree-verify must be an integer >= 1 and <= 1024, got '-2'", 13),
])
def test_pass_option_out_of_range(tmp_path, specir_cli, pair, options, message, col):
    target, drafter = pair
    from tests.helpers.specs import write_spec
    p = write_spec(tmp_path, "p", target, drafter)
    assert_error(specir_cli("opt", p, "-p", "tree-verify{" + options + "}"), message, f"-p:1:{col}")


def test_init_tree_budget_out_of_range(specir_cli, pair):
    target, drafter = pair
    assert_error(specir_cli("init", "--target-model", target, "--drafter", drafter, "--draft", "tree",
                            "--budget", "0"), "--budget must be at least 1, got 0")


def test_tree_verify_twice_says_so(tmp_path, specir_cli, pair):
    target, drafter = pair
    from tests.helpers.specs import write_spec
    p = write_spec(tmp_path, "p", target, drafter)
    err = assert_error(specir_cli("opt", p, "-p", "tree-verify,tree-verify"), "this step drafts with: draft.tree")
    assert "tree-verify has run" in err and "n-gram" not in err


def test_spec_argument_is_a_checkpoint_folder(specir_cli, family_checkpoints):
    folder = family_checkpoints["llama"]
    err = assert_error(specir_cli("opt", folder), f"{folder} is a folder, not a .spec file", str(folder))
    assert "specir init --target-model" in err and "Errno" not in err


def test_init_drafter_ngram_typo(specir_cli, family_checkpoints):
    err = assert_error(specir_cli("init", "--target-model", family_checkpoints["llama"], "--drafter", "ngarm"),
                       "--drafter 'ngarm' is neither 'ngram', 'none' nor an existing folder")
    assert "did you mean --drafter ngram?" in err
    err = assert_error(specir_cli("init", "--target-model", family_checkpoints["llama"], "--drafter", "Nnoe"),
                       "--drafter 'Nnoe' is neither 'ngram', 'none' nor an existing folder")
    assert "did you mean --drafter none?" in err


def test_init_drafter_none_has_no_tree(specir_cli, family_checkpoints):
    err = assert_error(specir_cli("init", "--target-model", family_checkpoints["llama"], "--drafter", "none",
                                  "--draft", "tree"),
                       "--drafter none decodes autoregressively: there is no tree to draft")
    assert "leave --draft tree out" in err
