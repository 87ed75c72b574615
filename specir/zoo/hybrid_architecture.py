"""The zoo's small hybrid target (Qwen3.5 family: Gated DeltaNet layers interleaved with gated
full attention), trained on the same corpus and tokenizer as the Llama pair so that the shipped
code-drafter drafts for it.

Shape (`HYBRID`): the Llama target's width (256), MLP (768) and attention heads (4 query / 1 kv
of head_dim 128: Qwen3.5-9B's GQA ratio of 4); Gated DeltaNet with 1 key head and 2 value heads
of 128 (Qwen3.5-9B's key/value head ratio of 2 and head sizes), convolution kernel 4; layers
`linear, linear, full` twice; rope as Qwen3.5 (theta 1e7, partial rotary factor 0.25);
untied embeddings. `model_config(role, vocab)` returns the transformers config of any zoo role
(the Llama ones from architectures.py, "hybrid" from here).
"""
from __future__ import annotations

HYBRID_ROLE = "hybrid"

HYBRID = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=6,
              layer_types=["linear_attention", "linear_attention", "full_attention"] * 2,
              num_attention_heads=4, num_key_value_heads=1, head_dim=128,
              linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=128,
              linear_value_head_dim=128, linear_conv_kernel_dim=4,
              rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                               "partial_rotary_factor": 0.25},
              tie_word_embeddings=False)


def hybrid_config(vocab_size: int, *, max_position_embeddings: int = 32768, **overrides):
    """The `Qwen3_5TextConfig` of the zoo's hybrid target for a vocabulary."""
    from transformers import Qwen3_5TextConfig

    fields = dict(rms_norm_eps=1e-6, hidden_act="silu", attention_bias=False,
                  bos_token_id=None, eos_token_id=0, pad_token_id=0, initializer_range=0.02)
    fields.update(HYBRID)
    fields.update(overrides)
    return Qwen3_5TextConfig(vocab_size=vocab_size, max_position_embeddings=max_position_embeddings, **fields)


def model_config(role: str, vocab_size: int, **overrides):
    """The transformers config of a zoo role: "hybrid" here, the Llama roles in architectures.py."""
    if role == HYBRID_ROLE:
        return hybrid_config(vocab_size, **overrides)
    from .architectures import llama_config
    return llama_config(role, vocab_size, **overrides)


def count_parameters(config) -> int:
    """Parameters of a zoo config (tied embeddings counted once); Llama by formula, others by
    building the model on the meta device."""
    if config.model_type == "llama":
        from .architectures import parameter_count
        return parameter_count(config)
    import torch
    from transformers import AutoModelForCausalLM
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())
