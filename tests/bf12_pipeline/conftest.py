"""Checkpoints wide enough for BF12 (hidden 256 = two groups of 128 along K) and small enough for
CPU tests: a Llama target with one heavily sparse matrix (stays bf16) and a drafter that is a
noisy copy of it; a Qwen2 model with tied embeddings and q/k/v biases.

TRITON_INTERPRET=1 is set here when there is no GPU, before any Triton kernel module is imported."""
from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

VOCAB = 259
WIDE = dict(hidden_size=256, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=VOCAB, initializer_range=0.3)
SPARSE = "model.layers.1.mlp.down_proj.weight"


def make_sparse(folder, name: str, fraction: float = 0.4, seed: int = 0) -> None:
    """Zero `fraction` of tensor `name` in the folder's model.safetensors, in place."""
    from safetensors.torch import load_file, save_file
    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    g = torch.Generator().manual_seed(seed)
    t = tensors[name]
    t[torch.rand(t.shape, generator=g) < fraction] = 0
    save_file(tensors, str(path), metadata={"format": "pt"})


@pytest.fixture(scope="session")
def wide_pair(tmp_path_factory):
    """(target, drafter) Llama folders, hidden 256; the target's SPARSE matrix is 40% zeros."""
    from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
    root = tmp_path_factory.mktemp("bf12_pair")
    target = make_checkpoint("llama", root / "target", seed=21, **WIDE)
    drafter = make_checkpoint("llama", root / "drafter", seed=22, noise_from=target, noise=0.05)
    make_sparse(target, SPARSE)
    for folder in (target, drafter):
        write_tokenizer(folder, VOCAB)
    return target, drafter


@pytest.fixture(scope="session")
def tied_qwen(tmp_path_factory):
    """A Qwen2 folder (tied embeddings, q/k/v biases), hidden 256."""
    from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
    folder = make_checkpoint("qwen2", tmp_path_factory.mktemp("bf12_qwen") / "qwen", seed=23, **WIDE)
    write_tokenizer(folder, VOCAB)
    return folder
