"""Hybrid importers on checkpoints made with transformers' own classes: every weight the IR
declares is in the checkpoint with its shape (and every checkpoint tensor is used); the recurrent
ops name their state; the IR round-trips through the printer and survives canonicalize; configs
the importers cannot honour are refused with a SpecirError naming the config key."""
from __future__ import annotations

import json

import pytest
from safetensors import safe_open

from specir.errors import SpecirError
from specir.importers import import_model
from specir.ir.ops_recurrent import state_specs
from specir.ir.parser import parse
from specir.ir.printer import print_pipeline
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from tests.hybrid.checkpoints import HYBRID_FAMILIES, make_hybrid_checkpoint
from tests.hybrid.helpers import ar_pipeline

RECURRENT = {"qwen3_5": ("conv", "delta"), "qwen3_next": ("conv", "delta"), "bamba": ("conv", "ssm"),
             "nemotron_h": ("conv", "ssm"), "falcon_h1": ("conv", "ssm"), "granitemoehybrid": ("conv", "ssm")}


def _disk(folder):
    out = {}
    for file in folder.glob("*.safetensors"):
        with safe_open(str(file), "pt") as f:
            for name in f.keys():
                out[name] = tuple(f.get_slice(name).get_shape())
    return out


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_weights_match_checkpoint_exactly(family, hybrid_checkpoints):
    folder = hybrid_checkpoints[family]
    model = import_model("target", str(folder))
    ir = {w.name: tuple(w.type.shape) for w in model.weights}
    disk = _disk(folder)
    assert ir == {k: v for k, v in disk.items() if k in ir}
    assert set(disk) - set(ir) <= {"lm_head.weight"}  # a tied head transformers may also save
    names = {spec.name for op in model.graph.ops for spec in state_specs(op)}
    assert names == set(RECURRENT[family])
    layers = {(s.layer, s.name) for op in model.graph.ops for s in state_specs(op)}
    assert len(layers) == sum(1 for op in model.graph.ops if state_specs(op))  # (layer, state) unique


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_ir_round_trips_and_survives_canonicalize(family, hybrid_checkpoints):
    pipeline = ar_pipeline(hybrid_checkpoints[family])
    text = print_pipeline(pipeline)
    assert print_pipeline(parse(text)) == text
    assert "mask" in text and ("gated_delta_rule" in text or "mamba2_scan" in text)
    canon = PassManager(build_passes("canonicalize")).run(pipeline)
    assert {w.name for w in canon.model("target").weights} == {w.name for w in pipeline.model("target").weights}


def _refused(folder, key):
    with pytest.raises(SpecirError) as info:
        import_model("target", str(folder))
    assert key in info.value.message and info.value.hint
    return info.value


def test_qwen3_next_moe_is_refused(tmp_path):
    folder = make_hybrid_checkpoint("qwen3_next", tmp_path / "moe", num_experts=4, num_experts_per_tok=2,
                                    moe_intermediate_size=32, shared_expert_intermediate_size=32,
                                    decoder_sparse_step=1, mlp_only_layers=[1])
    err = _refused(folder, "num_experts")
    assert "[0, 2]" in err.message  # the MoE layers (layer 1 is dense by mlp_only_layers)


def test_nemotron_moe_block_is_refused(tmp_path):
    folder = make_hybrid_checkpoint("nemotron_h", tmp_path / "moe",
                                    layers_block_type=["linear_attention", "moe", "full_attention"],
                                    n_routed_experts=2, moe_intermediate_size=32,
                                    moe_shared_expert_intermediate_size=32, num_experts_per_tok=1)
    _refused(folder, "layers_block_type")


def test_granite_experts_are_refused(tmp_path):
    folder = make_hybrid_checkpoint("granitemoehybrid", tmp_path / "moe", num_local_experts=2,
                                    num_experts_per_tok=1, intermediate_size=32)
    _refused(folder, "num_local_experts")


@pytest.mark.parametrize("family,key", [("bamba", "hidden_act"), ("nemotron_h", "mamba_hidden_act")])
def test_conv_activation_other_than_silu_is_refused(family, key, tmp_path, hybrid_checkpoints):
    folder = tmp_path / family
    folder.mkdir()
    src = hybrid_checkpoints[family]
    for f in src.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    config[key] = "gelu"
    (folder / "config.json").write_text(json.dumps(config))
    _refused(folder, key)


def test_invalid_config_is_a_specir_error(tmp_path, hybrid_checkpoints):
    folder = tmp_path / "bad"
    folder.mkdir()
    for f in hybrid_checkpoints["bamba"].iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    config["mamba_d_head"] = 7  # transformers' validation: heads x head_dim != expand x hidden
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecirError) as info:
        load_pipeline("<t>", text=f'pipeline p {{\n  model @t = import("{folder}")\n}}\n')
    assert "config" in info.value.message and info.value.path


def test_missing_recurrent_tensor_names_it(tmp_path, hybrid_checkpoints):
    from safetensors.torch import load_file, save_file
    folder = tmp_path / "cut"
    folder.mkdir()
    src = hybrid_checkpoints["falcon_h1"]
    for f in src.iterdir():
        if f.suffix != ".safetensors":
            (folder / f.name).write_bytes(f.read_bytes())
    tensors = load_file(str(src / "model.safetensors"))
    del tensors["model.layers.1.mamba.A_log"]
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(SpecirError) as info:
        import_model("target", str(folder))
    assert "model.layers.1.mamba.A_log" in info.value.message
