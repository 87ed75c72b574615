"""Config variants beyond the fixtures' (the general case of each family), fp32 logits against
transformers over a prefill and three single-token steps (1e-4 of the logit range): other layer
patterns (all-recurrent, recurrent-last), conv kernels 2 and 5, n_groups = heads, key heads =
value heads, attention bias, tied embeddings, full and no rotary, Falcon-H1 without its gated
norm, Nemotron-H with a silu MLP, Nemotron-H with attention after MLP-only blocks (its KV-cache
layer is numbered among attention layers, not decoder layers: a decoder index past the count of
layered ops is refused by the verifier), Granite without rope."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.hybrid.checkpoints import VOCAB, make_hybrid_checkpoint
from tests.hybrid.helpers import runner_for

VARIANTS = {
    "qwen3_5-bias-tied-full-rope": ("qwen3_5", dict(
        attention_bias=True, tie_word_embeddings=True, linear_conv_kernel_dim=2, num_hidden_layers=3,
        layer_types=["full_attention", "linear_attention", "linear_attention"],
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 1.0})),
    "qwen3_next-equal-heads": ("qwen3_next", dict(
        linear_num_key_heads=4, linear_num_value_heads=4, linear_conv_kernel_dim=5, tie_word_embeddings=False)),
    "bamba-all-mamba": ("bamba", dict(attn_layer_indices=None, num_hidden_layers=2, mamba_n_groups=8,
                                      mamba_d_conv=2, mamba_conv_bias=False, mamba_proj_bias=True)),
    "nemotron_h-silu-mlp": ("nemotron_h", dict(layers_block_type=["mlp", "full_attention", "linear_attention"],
                                               mlp_hidden_act="silu", n_groups=8, use_bias=True)),
    "nemotron_h-attention-after-mlps": ("nemotron_h", dict(
        layers_block_type=["mlp", "mlp", "linear_attention", "mlp", "mlp", "full_attention"])),
    "falcon_h1-plain-gate": ("falcon_h1", dict(mamba_rms_norm=False, tie_word_embeddings=True,
                                               projectors_bias=True, mamba_proj_bias=True)),
    "granite-nope": ("granitemoehybrid", dict(position_embedding_type=None, layer_types=["attention", "mamba"],
                                              num_hidden_layers=2, mamba_n_groups=2, tie_word_embeddings=False)),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_matches_transformers(variant, tmp_path):
    family, overrides = VARIANTS[variant]
    folder = make_hybrid_checkpoint(family, tmp_path / "ckpt", seed=7, **overrides)
    torch.manual_seed(3)
    ids = torch.randint(0, VOCAB, (1, 11))
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf(ids, use_cache=False).logits[0].float()  # transformers cannot size a cache without attention
    runner = runner_for(folder)
    outs = [runner.forward([0], ids[:, :8], torch.arange(8)[None])[0]]
    runner.cache.commit_prefix(0, 8)
    for t in range(8, 11):
        outs.append(runner.forward([0], ids[:, t:t + 1], torch.tensor([[t]]))[0])
        runner.cache.commit_prefix(0, 1)
    err = (torch.cat(outs).float() - ref).abs().max() / ref.abs().max()
    assert err < 1e-4, f"{variant}: {err:.2e} of the logit range"


def test_qwen3_5_vision_language_checkpoint_imports_its_text_model(tmp_path):
    """A `qwen3_5` checkpoint (Qwen3_5ForConditionalGeneration: weights under model.language_model,
    a vision tower beside it) imports as its text model and matches transformers on text."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    from tests.hybrid.checkpoints import hybrid_config
    vision = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=32, out_hidden_size=64, patch_size=4,
                  temporal_patch_size=2, spatial_merge_size=2)
    torch.manual_seed(5)
    model = Qwen3_5ForConditionalGeneration(Qwen3_5Config(text_config=hybrid_config("qwen3_5").to_dict(),
                                                          vision_config=vision))
    model.to(torch.bfloat16).save_pretrained(tmp_path / "vlm")
    ids = torch.randint(0, VOCAB, (1, 10))
    ref = Qwen3_5ForConditionalGeneration.from_pretrained(tmp_path / "vlm", dtype=torch.float32).eval()
    with torch.no_grad():
        expected = ref(input_ids=ids).logits[0]
    runner = runner_for(tmp_path / "vlm")
    assert not any("visual" in w for w in runner.weights)
    ours = runner.forward([0], ids, torch.arange(10)[None])[0]
    assert (ours - expected).abs().max() / expected.abs().max() < 1e-4
