"""Inflation: logits of the inflated model match the small model's; padding holds realistic
values; the agreement check passes, and fails when the embedding is broken on purpose."""
from __future__ import annotations

import json

import pytest
import torch

from specir.errors import SpecirError
from specir.zoo.architectures import ROPE_LLAMA31, ROPE_LLAMA32
from specir.zoo.inflate import check_compatible, inflate, layer_positions
from specir.zoo.shapes import SHAPES, Shape
from tests.zoo.conftest import make_small_model

QUIET = dict(log=lambda *a: None)
# fp32 logits of a model with |logits| ~ 3: the construction is exact up to summation order.
LOGIT_TOLERANCE = 1e-4

UNTIED = Shape("test-untied", 128, 5, 8, 2, 16, 160, 400, False, ROPE_LLAMA31)   # r = 4
TIED = Shape("test-tied", 64, 3, 8, 2, 16, 96, 400, True, ROPE_LLAMA31)          # r = 2


@pytest.fixture(scope="module")
def small(tiny_corpus, tmp_path_factory):
    return make_small_model(tmp_path_factory.mktemp("small") / "m", tiny_corpus / "tokenizer.json",
                            vocab=384)


@pytest.fixture(scope="module")
def small_tied(tiny_corpus, tmp_path_factory):
    return make_small_model(tmp_path_factory.mktemp("small_tied") / "m", tiny_corpus / "tokenizer.json",
                            vocab=384, tied=True, seed=1)


def _logits(folder, ids):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("which,shape", [("small", UNTIED), ("small_tied", TIED), ("small", TIED)],
                         ids=["untied", "tied", "untied-into-tied-fails"])
def test_inflated_logits_match(request, which, shape, tmp_path):
    folder = request.getfixturevalue(which)
    if which == "small" and shape.tie_word_embeddings:
        with pytest.raises(SpecirError, match="ties embeddings"):
            inflate(folder, shape, tmp_path / "big", **QUIET)
        return
    report = inflate(folder, shape, tmp_path / "big", seed=3, **QUIET)
    ids = torch.randint(1, 384, (2, 48), generator=torch.Generator().manual_seed(0))
    small_logits, big_logits = _logits(folder, ids), _logits(tmp_path / "big", ids)
    assert big_logits.shape[-1] == shape.vocab_size
    assert small_logits.abs().max() > 1.0  # a non-trivial function
    torch.testing.assert_close(big_logits[..., :384], small_logits, atol=LOGIT_TOLERANCE, rtol=0)
    # padding vocabulary never wins
    assert (big_logits[..., 384:].max(-1).values < small_logits.max(-1).values).all()
    cfg = json.loads((tmp_path / "big" / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == (
        shape.hidden_size, shape.num_hidden_layers, shape.vocab_size)
    assert report["real_layer_positions"] == layer_positions(2, shape.num_hidden_layers)


def test_padding_holds_realistic_values(small, tmp_path):
    from safetensors.torch import load_file

    report = inflate(small, UNTIED, tmp_path / "big", **QUIET)
    index = json.loads((tmp_path / "big" / "model.safetensors.index.json").read_text())
    for shard in sorted(set(index["weight_map"].values())):
        for name, t in load_file(str(tmp_path / "big" / shard)).items():
            assert t.dtype == torch.bfloat16
            tiny = (t.float().abs() < 1e-3).float().mean().item()
            assert tiny < 0.05, f"{name}: {tiny:.1%} of entries are (near) zero"
    for role, stats in report["tensors"].items():
        assert stats["std"]["min"] > 0.2 * stats["trained_std"]["min"], role
        assert abs(stats["window14_coverage"] - stats["trained_window14_coverage"]) < 0.02, role


def test_incompatible_models_are_refused(small):
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(small))
    wrong_head = Shape("x", 128, 4, 8, 2, 32, 160, 400, False, ROPE_LLAMA31)
    with pytest.raises(SpecirError, match="head_dim"):
        check_compatible(cfg, wrong_head)
    wrong_rope = Shape("x", 128, 4, 8, 2, 16, 160, 400, False, ROPE_LLAMA32)
    with pytest.raises(SpecirError, match="rope parameter factor"):
        check_compatible(cfg, wrong_rope)
    odd_width = Shape("x", 96, 4, 8, 2, 16, 160, 400, False, ROPE_LLAMA31)
    with pytest.raises(SpecirError, match="power-of-two"):
        check_compatible(cfg, odd_width)
    wrong_gqa = Shape("x", 128, 4, 8, 4, 16, 160, 400, False, ROPE_LLAMA31)
    with pytest.raises(SpecirError, match="GQA"):
        check_compatible(cfg, wrong_gqa)


def test_production_shapes_fit_the_zoo_architectures():
    from specir.zoo.architectures import llama_config

    target, drafter = llama_config("target", 4096), llama_config("drafter", 4096)
    assert check_compatible(target, SHAPES["llama-3.1-8b"]) == 16
    assert check_compatible(target, SHAPES["llama-1b-hd128"]) == 8
    assert check_compatible(drafter, SHAPES["llama-3.2-1b"]) == 16
    assert check_compatible(target, SHAPES["test-target"]) == 2
    assert check_compatible(drafter, SHAPES["test-drafter"]) == 2
    assert abs(SHAPES["llama-3.1-8b"].parameters() - 8.03e9) < 0.01e9
    assert abs(SHAPES["llama-3.2-1b"].parameters() - 1.236e9) < 0.01e9
    mid = llama_config("mid", 4096)
    assert check_compatible(mid, SHAPES["llama-3.2-3b"]) == 16
    assert check_compatible(mid, SHAPES["test-mid"]) == 2
    assert abs(SHAPES["llama-3.2-3b"].parameters() - 3.21e9) < 0.01e9


def _prompts_file(path, n=4):
    lines = [json.dumps({"prompt_ids": [(7 * i + j) % 380 + 1 for j in range(12)],
                         "max_new_tokens": 12}) for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_agreement_passes_and_catches_a_broken_embedding(small, tmp_path, capsys):
    from specir.cli import cmd_zoo

    prompts = _prompts_file(tmp_path / "prompts.jsonl")
    inflate(small, UNTIED, tmp_path / "good", **QUIET)
    rc = cmd_zoo.main(["agree", str(small), str(tmp_path / "good"), "--workload", str(prompts),
                       "--device", "cpu", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["agreement"] == 1.0 and report["tokens"] >= 24
    assert report["max_abs_logit_diff"] < LOGIT_TOLERANCE
    for sabotage in ("no-norm-rescale",):
        inflate(small, UNTIED, tmp_path / sabotage, sabotage=sabotage, **QUIET)
        rc = cmd_zoo.main(["agree", str(small), str(tmp_path / sabotage), "--workload", str(prompts),
                           "--device", "cpu"])
        out = capsys.readouterr().out
        assert rc == 1, f"{sabotage}: the broken embedding passed\n{out}"
        assert "differs:" in out


def test_width_only_drafter_shape_maps_layers_one_to_one():
    """llama-1b-width-3l: the 1B drafter width at the zoo drafter's own depth (no extra layers)."""
    from specir.zoo.architectures import llama_config
    from specir.zoo.inflate import layer_positions

    drafter = llama_config("drafter", 4096)
    shape = SHAPES["llama-1b-width-3l"]
    assert check_compatible(drafter, shape) == 16
    assert shape.num_hidden_layers == drafter.num_hidden_layers
    assert layer_positions(drafter.num_hidden_layers, shape.num_hidden_layers) == list(range(shape.num_hidden_layers))
    big = SHAPES["llama-3.2-1b"]
    assert (shape.hidden_size, shape.num_attention_heads, shape.num_key_value_heads, shape.head_dim,
            shape.intermediate_size, shape.vocab_size, shape.tie_word_embeddings) == \
        (big.hidden_size, big.num_attention_heads, big.num_key_value_heads, big.head_dim,
         big.intermediate_size, big.vocab_size, big.tie_word_embeddings)


def test_the_gpu_bench_inflates_in_memory_exactly_what_inflate_writes(small, tmp_path):
    from safetensors.torch import load_file

    from tests.helpers.bench_scripts import load_bench_script
    inflate(small, UNTIED, tmp_path / "big", seed=5, **QUIET)
    on_disk = {}
    for shard in (tmp_path / "big").glob("*.safetensors"):
        on_disk.update(load_file(str(shard)))
    config, in_memory = load_bench_script("gpu_bench").inflate_in_memory(small, UNTIED, "cpu", seed=5)
    assert in_memory.keys() == on_disk.keys()
    for name, tensor in on_disk.items():
        assert torch.equal(in_memory[name].view(torch.int16), tensor.view(torch.int16)), name
    assert config["hidden_size"] == UNTIED.hidden_size
