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


def check_text(text: str, what: str = "--prompt", location=None) -> None:
    """SpecirError when `text` cannot be encoded as UTF-8 (a lone surrogate: e.g. invalid bytes on
    the command line, or a \\ud800 escape in JSON), naming the character's position."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SpecirError(f"{what} is not valid Unicode text: a lone surrogate {text[exc.start]!r} at character "
                          f"{exc.start}", location=location,
                          hint="prompts are UTF-8 text (the terminal may have passed bytes that are not UTF-8); "
                               "give token ids instead with --prompt-ids or prompt_ids") from None


def encode(folder: str, text: str) -> list[int]:
    check_text(text)
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
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise SpecirError(f"--prompt-ids must be comma-separated integers, got {shown!r}",
                          hint="e.g. --prompt-ids 1,2,3") from None
    return ids
