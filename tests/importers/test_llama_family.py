"""Importer tests on checkpoints made with transformers' own config and model classes: every
weight name and shape in the IR matches the checkpoint exactly."""
from __future__ import annotations

import pytest
from safetensors import safe_open

from specir.importers import import_model
from specir.importers.llama import rope_attrs
from specir.ir.printer import print_pipeline
from specir.ir.parser import parse
from specir.load import load_pipeline
from tests.helpers.checkpoints import FAMILIES


def checkpoint_tensors(folder):
    out = {}
    for file in folder.glob("*.safetensors"):
        with safe_open(str(file), "pt") as f:
            for name in f.keys():
                out[name] = tuple(f.get_slice(name).get_shape())
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_weights_match_checkpoint_exactly(family, family_checkpoints):
    folder = family_checkpoints[family]
    model = import_model("target", str(folder))
    ir = {w.name: tuple(w.type.shape) for w in model.weights}
    disk = checkpoint_tensors(folder)
    assert ir == {k: v for k, v in disk.items() if k in ir}
    # every tensor on disk is used, except a tied lm_head that transformers may also save
    unused = set(disk) - set(ir)
    assert unused <= {"lm_head.weight"}
    assert all(w.type.dtype == "bf16" for w in model.weights)


def test_family_specifics(family_checkpoints):
    qwen2 = import_model("t", str(family_checkpoints["qwen2"]))
    assert any(w.name.endswith("q_proj.bias") for w in qwen2.weights)
    head = qwen2.graph.ops[-1]
    assert head.attrs["weight"] == "model.embed_tokens.weight"  # tied
    qwen3 = import_model("t", str(family_checkpoints["qwen3"]))
    groups = [op.attrs.get("group") for op in qwen3.graph.ops if op.name == "rms_norm" and op.attrs.get("group")]
    assert groups and set(groups) == {32}  # qk-norm per head with the explicit head_dim
    rope = next(op for op in qwen3.graph.ops if op.name == "rope").attrs["rope"]
    assert rope["type"] == "yarn" and rope["factor"] == 4.0
    mistral = import_model("t", str(family_checkpoints["mistral"]))
    attn = [op for op in mistral.graph.ops if op.name == "attention"]
    assert {op.attrs["window"] for op in attn} == {6} and {op.attrs["kv_heads"] for op in attn} == {1}
    llama = import_model("t", str(family_checkpoints["llama"]))
    assert next(op for op in llama.graph.ops if op.name == "rope").attrs["rope"]["type"] == "llama3"


def test_v4_style_rope_fields():
    rope = rope_attrs({"rope_theta": 1e6, "rope_scaling": {"type": "linear", "factor": 2}})
    assert rope == {"type": "linear", "theta": 1e6, "factor": 2.0}


def test_imported_pipeline_round_trips(tmp_path, family_checkpoints):
    spec = tmp_path / "p.spec"
    spec.write_text(f'pipeline p {{\n  model @target = import("{family_checkpoints["qwen3"]}")\n'
                    "  step(%ctx: context) {\n    %lg = verify.chain @target, %ctx\n"
                    "    %a = accept.greedy %lg\n    commit %ctx, %a\n  }\n}\n")
    text = print_pipeline(load_pipeline(spec))
    assert print_pipeline(parse(text)) == text


@pytest.mark.parametrize("model_type,default", [("llama", 2048), ("qwen3", 32768), ("mistral", 131072)])
def test_a_missing_max_position_takes_the_model_types_transformers_default(model_type, default):
    from specir.importers.llama import max_position
    assert max_position({"model_type": model_type}) == default
    assert max_position({"model_type": model_type, "max_position_embeddings": 300}) == 300
