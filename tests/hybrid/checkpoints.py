"""Tiny random checkpoints of the hybrid families, made with transformers' own config classes.

Each family's config exercises the features its importer must honour: layer patterns, GQA,
n_groups > 1, conv kernels other than 4, partial rotary factors, tied and untied embeddings,
Falcon-H1's and Granite's multipliers, Qwen3-Next's packed projections."""
from __future__ import annotations

from pathlib import Path

import torch

HYBRID_FAMILIES = ("qwen3_5", "qwen3_next", "bamba", "nemotron_h", "falcon_h1", "granitemoehybrid")
VOCAB = 96


def hybrid_config(family: str, **overrides):
    import transformers as tf
    base = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=112, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.25,
                bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if family == "qwen3_5":
        cls = tf.Qwen3_5TextConfig
        base.update(num_hidden_layers=4, head_dim=16,
                    layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
                    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                    linear_value_head_dim=8, linear_conv_kernel_dim=4, tie_word_embeddings=False)
    elif family == "qwen3_next":
        cls = tf.Qwen3NextConfig
        base.update(num_hidden_layers=3, head_dim=16, num_experts=0,
                    layer_types=["linear_attention", "full_attention", "linear_attention"],
                    linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=8,
                    linear_value_head_dim=8, linear_conv_kernel_dim=3, tie_word_embeddings=True,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})
    elif family == "bamba":
        cls = tf.BambaConfig
        base.update(num_hidden_layers=3, attn_layer_indices=[1], mamba_n_heads=8, mamba_d_state=16,
                    mamba_n_groups=2, mamba_d_conv=4, mamba_chunk_size=8, tie_word_embeddings=False)
    elif family == "nemotron_h":
        cls = tf.NemotronHConfig
        base.update(layers_block_type=["linear_attention", "mlp", "full_attention", "linear_attention", "mlp"],
                    head_dim=16, mamba_num_heads=8, mamba_head_dim=12, ssm_state_size=16, n_groups=2,
                    conv_kernel=3, chunk_size=8, time_step_min=0.001)
    elif family == "falcon_h1":
        cls = tf.FalconH1Config
        base.update(num_hidden_layers=2, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_state=16, mamba_n_groups=2,
                    mamba_d_conv=4, mamba_chunk_size=8, mamba_rms_norm=True, mamba_norm_before_gate=False,
                    tie_word_embeddings=False, embedding_multiplier=1.5, lm_head_multiplier=0.75,
                    mlp_multipliers=[1.25, 0.5], key_multiplier=0.8, attention_in_multiplier=1.1,
                    attention_out_multiplier=0.9, ssm_in_multiplier=1.2, ssm_out_multiplier=0.7,
                    ssm_multipliers=[0.5, 1.5, 0.75, 1.25, 0.6])
    elif family == "granitemoehybrid":
        cls = tf.GraniteMoeHybridConfig
        base.update(num_hidden_layers=3, layer_types=["mamba", "attention", "mamba"], num_local_experts=0,
                    shared_intermediate_size=48, mamba_n_heads=8, mamba_d_state=16, mamba_n_groups=1,
                    mamba_d_conv=4, mamba_chunk_size=8, embedding_multiplier=2.0, residual_multiplier=0.5,
                    attention_multiplier=0.125, logits_scaling=4.0, position_embedding_type="rope",
                    tie_word_embeddings=True)
    else:
        raise ValueError(family)
    base.update(overrides)
    return cls(**base)


def make_hybrid_checkpoint(family: str, folder: Path, *, seed: int = 0, dtype=torch.bfloat16, **overrides) -> Path:
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(hybrid_config(family, **overrides))
    model.to(dtype).save_pretrained(folder)
    return Path(folder)
