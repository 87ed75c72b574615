"""The declared target: written by init, filled in by load, kept by the printer, the parser and every
built-in pass, recorded by compile before any pass, and fixed against passes that try to move it."""
from __future__ import annotations

import json

import pytest

from specir.declared_target import read
from specir.errors import SpecirError
from specir.importers.digest import checkpoint_digest
from specir.ir.parser import parse
from specir.ir.printer import print_pipeline
from specir.load import load_pipeline
from specir.pass_infra import Pass, PassManager, build_passes
from tests.helpers.specs import write_spec


def test_init_declares_the_target_with_its_digest(specir_cli, pair):
    code, out, err = specir_cli("init", "--target-model", pair[0], "--drafter", pair[1])
    assert code == 0, err
    declared = read(parse(out))
    assert declared.model == "target" and declared.source == str(pair[0].resolve())
    assert declared.digest == checkpoint_digest(pair[0]) and declared.dtype == "bf16"
    assert print_pipeline(parse(out)) == out


@pytest.mark.parametrize("passes", ["canonicalize", "tree-verify{budget=8,topk=2}", "pack-weights{format=bf12}",
                                    "tree-verify,pack-weights{format=bf12},canonicalize"])
def test_every_builtin_pass_keeps_the_declaration(pair, tmp_path, passes):
    pipeline = load_pipeline(write_spec(tmp_path, "chain", *pair, k=3))
    out = PassManager(build_passes(passes)).run(pipeline)
    assert read(out) == read(pipeline)
    assert read(parse(print_pipeline(out))) == read(pipeline)


class ChangeDigest(Pass):
    name = "change-digest-test"

    def run(self, pipeline):
        declared = pipeline.attrs["target"]
        return pipeline.with_(attrs=pipeline.attrs.set(target=declared.set(digest="sha256:ff")))


class ChangeDtype(Pass):
    name = "change-dtype-test"

    def run(self, pipeline):
        declared = pipeline.attrs["target"]
        return pipeline.with_(attrs=pipeline.attrs.set(target=declared.set(dtype="f32")))


@pytest.mark.parametrize("cheat", [ChangeDigest, ChangeDtype])
def test_a_pass_may_not_change_the_declaration(pair, tmp_path, cheat):
    pipeline = load_pipeline(write_spec(tmp_path, "chain", *pair, k=3))
    with pytest.raises(SpecirError, match="changed the declared target"):
        PassManager([cheat()]).run(pipeline)


def test_a_hand_written_pipeline_gets_its_final_verify_model_declared(pair):
    text = (f'pipeline p {{\n  model @t = import("{pair[0]}")\n  step(%ctx: context) {{\n'
            "    %lg = verify.chain @t, %ctx\n    %acc = accept.greedy %lg\n    commit %ctx, %acc\n  }\n}\n")
    declared = read(load_pipeline("<test>", text=text))
    assert declared.model == "t" and declared.digest == checkpoint_digest(pair[0])


def test_compile_records_the_declared_target_before_the_passes(specir_cli, pair, tmp_path):
    spec = write_spec(tmp_path, "chain", *pair, k=3)
    code, _, err = specir_cli("compile", spec, "--target", "cpu", "-o", tmp_path / "b", "-p", "tree-verify")
    assert code == 0, err
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["declared_target"] == read(load_pipeline(spec)).as_dict()


def test_the_digest_is_cached_but_sees_rewritten_bytes(pair, tmp_path):
    import os
    import shutil
    folder = shutil.copytree(pair[0], tmp_path / "t")
    first = checkpoint_digest(folder)
    assert checkpoint_digest(folder) == first
    weights = folder / "model.safetensors"
    st = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: only ctime tells
    assert checkpoint_digest(folder) != first


def test_a_shared_reference_is_loaded_once_per_declared_target(pair, tmp_path, monkeypatch):
    """Reference.shared (the guard's judge and the search's forcing of timed outputs): one load for
    repeated calls with the same declared target, device and kind; a different digest (a changed
    checkpoint declared anew) or kind loads again, and only the last one is kept."""
    from specir.runtime import token_forcing
    from specir.runtime.token_forcing import Reference
    loads = []
    real = Reference.__init__

    def counting(self, declared, device, kind="auto"):
        loads.append((declared.digest, kind))
        real(self, declared, device, kind)
    monkeypatch.setattr(Reference, "__init__", counting)
    monkeypatch.setattr(token_forcing, "_SHARED", {})
    declared = read(load_pipeline(write_spec(tmp_path, "chain", *pair, k=3)))
    first = Reference.shared(declared, "cpu")
    assert Reference.shared(declared, "cpu") is first and len(loads) == 1
    ir = Reference.shared(declared, "cpu", "ir")
    assert ir is not first and ir.kind == "ir" and len(loads) == 2
    assert Reference.shared(declared, "cpu") is not first and len(loads) == 3  # one kept at a time
    other = type(declared)(declared.model, declared.source, "sha256:00", declared.dtype)
    Reference.shared(other, "cpu")
    assert loads[-1][0] == "sha256:00" and len(loads) == 4
