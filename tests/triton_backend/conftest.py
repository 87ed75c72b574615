"""A one-layer target/drafter pair for whole pipelines run by the Triton backend in Triton's CPU
interpreter (TRITON_INTERPRET=1 is set here when there is no GPU, before any kernel module is
imported; every launched program is interpreted in Python, so models, prompts and outputs stay
tiny)."""
from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

VOCAB = 259
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # the interpreter on a CPU


@pytest.fixture
def device() -> str:
    """Where the Triton backend runs these tests: the GPU when there is one, else the interpreter."""
    return DEVICE


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    """(target, drafter) folders: one-layer Llamas (hidden 64, 4/2 heads x 16, vocab 259); the
    drafter is a noisy copy of the target, so it mostly agrees."""
    from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
    root = tmp_path_factory.mktemp("triton_pair")
    common = dict(num_hidden_layers=1, vocab_size=VOCAB, intermediate_size=96, initializer_range=0.3)
    target = make_checkpoint("llama", root / "target", seed=11, **common)
    drafter = make_checkpoint("llama", root / "drafter", seed=12, noise_from=target, noise=0.1)
    for folder in (target, drafter):
        write_tokenizer(folder, VOCAB)
    return target, drafter
