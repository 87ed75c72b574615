"""Session fixtures: one tiny random checkpoint per hybrid family (bf16 on disk), and a Llama
drafter sharing their vocabulary; the pass tests' targets, drafter and ranking corpus."""
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


@pytest.fixture(scope="session")
def pass_checkpoints(tmp_path_factory):
    """({family: target folder} of PASS_FAMILIES, the Llama drafter, a ranking corpus), all with PASS_VOCAB ids and
    a byte-level tokenizer (tests/hybrid/helpers.py)."""
    from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
    from tests.hybrid.helpers import PASS_FAMILIES, PASS_VOCAB
    root = tmp_path_factory.mktemp("hybrid_passes")
    drafter = make_checkpoint("llama", root / "d", seed=11, vocab_size=PASS_VOCAB, num_hidden_layers=1)
    targets = {f: make_hybrid_checkpoint(f, root / f, seed=40 + i, vocab_size=PASS_VOCAB)
               for i, f in enumerate(PASS_FAMILIES)}
    for folder in (drafter, *targets.values()):
        write_tokenizer(folder, PASS_VOCAB)
    corpus = root / "traffic.txt"
    corpus.write_text("def parse(x):\n    return [t for t in x if t]\n" * 4)
    return targets, drafter, corpus
