"""A tiny target/drafter pair for searches: an independent random drafter (it disagrees with the
target, so a pass that trusts it is caught) and prompts."""
from __future__ import annotations

import pytest

from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.helpers.specs import write_prompts, write_spec


@pytest.fixture(scope="session")
def search_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("search-pair")
    target = make_checkpoint("llama", root / "target", seed=41, vocab_size=259, initializer_range=0.3)
    drafter = make_checkpoint("llama", root / "drafter", seed=42, vocab_size=259, initializer_range=0.3,
                              hidden_size=32, intermediate_size=48, num_hidden_layers=1)
    for folder in (target, drafter):
        write_tokenizer(folder, 259)
    spec = write_spec(root, "chain", target, drafter, k=3)
    prompts = write_prompts(root, 12, 259, seed=5, repetitive=True)
    return spec, prompts


def search_args(spec, prompts, out, memory, *extra):
    return ("search", spec, "--target", "cpu", "--prompts", prompts, "--out", out, "--memory", memory,
            "--rounds", 1, "--max-new-tokens", 6, "--candidate-timeout", 120, *extra)
