"""Config variants beyond the fixtures' (the general case of each family), fp32 logits against
transformers over a prefill and three single-token steps (1e-4 of the logit range): other layer
patterns (all-recurrent, recurrent-last), conv kernels 2 and 5, n_groups = heads, key heads =
value heads, attention bias, tied embeddings, full and no rotary, Falcon-H1 without its gated
norm, Nemotron-H with a silu MLP, Granite without rope."""
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
