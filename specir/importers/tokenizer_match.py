"""Target and drafter must tokenize identically: compare their tokenizer.json vocabularies."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import SpecirError


def _vocab(folder: Path) -> dict | None:
    file = folder / "tokenizer.json"
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecirError(f"tokenizer.json is unreadable: {exc}", path=str(file),
                          hint="re-save the tokenizer with save_pretrained") from None
    vocab = dict((data.get("model") or {}).get("vocab") or {})
    for tok in data.get("added_tokens") or []:
        vocab[tok.get("content")] = tok.get("id")
    return vocab


def check_same_tokenizer(target: Path, drafter: Path) -> None:
    a, b = _vocab(Path(target)), _vocab(Path(drafter))
    if a is None or b is None or a == b:
        return
    differ = sorted(set(a.items()) ^ set(b.items()), key=lambda kv: str(kv))[:3]
    raise SpecirError(f"the drafter's tokenizer differs from the target's ({len(a)} vs {len(b)} entries; "
                      f"e.g. {differ[0][0]!r})", path=str(drafter),
                      hint="speculative decoding needs one tokenizer: pick a drafter of the target's family")
