"""Tiny random Hugging Face checkpoints made with transformers' own config and model classes."""
from __future__ import annotations

from pathlib import Path

import torch

FAMILIES = ("llama", "qwen2", "qwen3", "mistral")


def config_for(family: str, **overrides):
    from transformers import LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config
    base = dict(vocab_size=96, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.25,
                bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if family == "llama":
        cls = LlamaConfig
        base.update(rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 64})
    elif family == "qwen2":
        cls = Qwen2Config
        base.update(tie_word_embeddings=True)
    elif family == "qwen3":
        cls = Qwen3Config
        base.update(head_dim=32, tie_word_embeddings=False,
                    rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                     "original_max_position_embeddings": 64})
    elif family == "mistral":
        cls = MistralConfig
        base.update(sliding_window=6, num_key_value_heads=1)
    else:
        raise ValueError(family)
    base.update(overrides)
    return cls(**base)


def make_checkpoint(family: str, folder: Path, *, seed: int = 0, dtype=torch.bfloat16, noise_from=None,
                    noise: float = 0.0, **overrides) -> Path:
    """Save a random model of `family` to `folder`. With `noise_from` (a folder), copy that model
    and add relative Gaussian noise to every weight (a drafter that mostly agrees)."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    if noise_from is not None:
        model = AutoModelForCausalLM.from_pretrained(noise_from, dtype=torch.float32)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * noise * p.std().clamp_min(1e-3))
    else:
        model = AutoModelForCausalLM.from_config(config_for(family, **overrides))
    model.to(dtype).save_pretrained(folder)
    return Path(folder)


def write_tokenizer(folder: Path, vocab_size: int) -> None:
    """A byte-level BPE tokenizer with exactly `vocab_size` entries, saved as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    text = ["def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n"] * 20
    tok.train_from_iterator(text, trainer)
    assert tok.get_vocab_size() <= vocab_size
    tok.save(str(Path(folder) / "tokenizer.json"))
