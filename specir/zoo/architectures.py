"""Architectures of the zoo's small trained pair (Llama family, Hugging Face `LlamaConfig`).

The small models carry the head_dim, rope parameters and GQA ratio of the production shapes they
are inflated into (see shapes.py), so that attention heads embed one to one:
- target  -> Llama-3.1-8B: head_dim 128, 4 query heads per kv head, rope theta 500000 with
             llama3 scaling factor 8; untied embeddings;
- drafter -> Llama-3.2-1B: head_dim 64, 4 query heads per kv head, llama3 scaling factor 32;
             tied embeddings (as Llama-3.2-1B);
- mid     -> Llama-3.2-3B: the target's head_dim 128 with 3 query heads per kv head, the
             drafter's rope (llama3 factor 32) and tied embeddings, as Llama-3.2-3B has (hidden
             3072 = 16 x 192). The mid-level verifier of two-level-verify{kind=model}: hidden 192,
             4 layers, about 2.4x the drafter's and 0.45x the target's matmul work a token.
All keep their shape's max_position_embeddings (131072, as the rope scaling expects), though they
are trained on 512-token windows: longer contexts run but are extrapolation.
"""
from __future__ import annotations

from specir.errors import SpecirError

ROPE_LLAMA31 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}
ROPE_LLAMA32 = {**ROPE_LLAMA31, "factor": 32.0}

ARCHITECTURES = {
    "target": dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4,
                   num_key_value_heads=1, head_dim=128, intermediate_size=768,
                   tie_word_embeddings=False, rope_parameters=ROPE_LLAMA31),
    "drafter": dict(hidden_size=128, num_hidden_layers=3, num_attention_heads=4,
                    num_key_value_heads=1, head_dim=64, intermediate_size=384,
                    tie_word_embeddings=True, rope_parameters=ROPE_LLAMA32),
    "mid": dict(hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
                num_key_value_heads=1, head_dim=128, intermediate_size=576,
                tie_word_embeddings=True, rope_parameters=ROPE_LLAMA32),
    # A model small enough for tests and smoke runs on a laptop CPU.
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=1, head_dim=16, intermediate_size=64,
                 tie_word_embeddings=False, rope_parameters=ROPE_LLAMA31),
}


def llama_config(role: str, vocab_size: int, *, max_position_embeddings: int = 131072,
                 **overrides):
    """The `LlamaConfig` of a zoo role ("target", "drafter", "mid", "tiny") for a vocabulary."""
    from transformers import LlamaConfig

    if role not in ARCHITECTURES:
        raise SpecirError(f"unknown zoo model role '{role}'",
                          hint=f"choose one of: {', '.join(ARCHITECTURES)}")
    fields = dict(rms_norm_eps=1e-5, hidden_act="silu", attention_bias=False, mlp_bias=False,
                  bos_token_id=None, eos_token_id=0, pad_token_id=0, initializer_range=0.02)
    fields.update(ARCHITECTURES[role])
    fields.update(overrides)
    return LlamaConfig(vocab_size=vocab_size, max_position_embeddings=max_position_embeddings,
                       **fields)


def parameter_count(config) -> int:
    """Parameters of a Llama config (tied embeddings counted once)."""
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h
    embeddings = v * h * (1 if config.tie_word_embeddings else 2)
    return config.num_hidden_layers * layer + embeddings + h
