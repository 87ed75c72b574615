"""Fixtures of the zoo tests: a tiny stdlib corpus and tiny Llama models with a real tokenizer."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specir.zoo.architectures import llama_config
from specir.zoo.corpus import write_corpus
from specir.zoo.stdlib_sources import Document, scan_documents, stdlib_root
from specir.zoo.tokenizer import save_hf_tokenizer

TINY_SOURCES = ("json/", "textwrap.py", "string.py", "shlex.py", "heapq.py", "bisect.py")


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """A corpus of a few stdlib modules (about 150 KB), vocab 384, every 4th file held out."""
    root = stdlib_root()
    docs = []
    for i, rel in enumerate(sorted(p.relative_to(root).as_posix() for p in root.glob("json/*.py"))
                            + list(TINY_SOURCES[1:])):
        text = (root / rel).read_text(encoding="utf-8")
        docs.append(Document(rel, "code", text, "heldout" if i % 4 == 1 else "train"))
    out = tmp_path_factory.mktemp("corpus")
    write_corpus(out, docs, vocab_size=384, log=lambda *a: None)
    return out


def make_small_model(folder: Path, tokenizer_json: Path, *, vocab: int, tied: bool = False,
                     seed: int = 0, role: str = "tiny", **overrides) -> Path:
    """A random bf16 Llama of a zoo architecture with non-trivial norms, plus a tokenizer."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    cfg = llama_config(role, vocab, initializer_range=0.15, tie_word_embeddings=tied, **overrides)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    model.to(torch.bfloat16).save_pretrained(str(folder))
    save_hf_tokenizer(tokenizer_json, folder)
    return folder
