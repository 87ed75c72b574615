"""The target's tokenizer (tokenizer.json in its checkpoint folder), loaded offline."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from ..errors import SpecirError


@lru_cache(maxsize=8)
def load_tokenizer(folder: str):
    path = Path(folder)
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer.model").is_file():
        raise SpecirError(f"the checkpoint {folder} has no tokenizer", path=folder,
                          hint="pass token ids instead (--prompt-ids 1,2,3, or prompt_ids in a prompts file)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as exc:  # transformers raises many kinds here
        raise SpecirError(f"cannot load the tokenizer of {folder}: {exc}", path=folder,
                          hint="check tokenizer.json / tokenizer_config.json, or use --prompt-ids") from None


def encode(folder: str, text: str) -> list[int]:
    return list(load_tokenizer(folder)(text)["input_ids"])


def decode(folder: str, ids: list[int]) -> str:
    try:
        return load_tokenizer(folder).decode(ids, skip_special_tokens=True)
    except SpecirError:
        return ""


def parse_prompt_ids(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise SpecirError(f"--prompt-ids must be comma-separated integers, got {text!r}",
                          hint="e.g. --prompt-ids 1,2,3") from None
    return ids
