"""Session fixtures: one tiny random checkpoint per hybrid family (bf16 on disk), and a Llama
drafter sharing their vocabulary."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.hybrid.checkpoints import HYBRID_FAMILIES, VOCAB, make_hybrid_checkpoint


@pytest.fixture(scope="session")
def hybrid_checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hybrid")
    return {f: make_hybrid_checkpoint(f, root / f, seed=i) for i, f in enumerate(HYBRID_FAMILIES)}


@pytest.fixture(scope="session")
def llama_drafter(tmp_path_factory) -> Path:
    from tests.helpers.checkpoints import make_checkpoint
    return make_checkpoint("llama", tmp_path_factory.mktemp("drafter") / "d", seed=11, vocab_size=VOCAB,
                           num_hidden_layers=1)
