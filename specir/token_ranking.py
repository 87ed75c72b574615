"""Token ids ranked by how often a corpus uses them: draft-vocab{order=frequency}'s kept ids.

Contract: `ranked_ids(folder, vocab, corpus)` is every id 0..vocab-1 once, most frequent first in
`corpus` tokenised with the tokenizer of the checkpoint `folder`; equal counts (unseen ids among
them) in id order. Deterministic for the same tokenizer and corpus text. `corpus` is
- "stdlib": the train split of the zoo's documents (specir/zoo/stdlib_sources.py's fixed list,
  read from this interpreter's standard library). Python versions differ slightly, so the ranking
  may too: drafts, never outputs, change;
- a path: a text file, a JSONL file (each line's "text", else "prompt" + "completion"), or a folder
  whose *.txt / *.py / *.md / *.jsonl files are read in sorted order: rank on your own traffic.
A corpus longer than CORPUS_CHARS is sampled: each text's first CORPUS_CHARS / total of it (every
document counts, code and prose alike). A missing tokenizer or corpus is one SpecirError with a hint.
"""
from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from pathlib import Path

from .errors import SpecirError

CORPUS_CHARS = 4_000_000  # text tokenised for a ranking (about a million tokens)
TEXT_SUFFIXES = (".txt", ".py", ".md", ".jsonl")


def _jsonl_texts(path: Path):
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecirError(f"line {n} of the ranking corpus is not JSON: {exc.msg}", path=str(path),
                              hint="one JSON object per line, with a \"text\" field") from None
        if not isinstance(row, dict):
            continue
        text = row.get("text")
        yield text if isinstance(text, str) else "".join(v for v in (row.get("prompt"), row.get("completion"))
                                                          if isinstance(v, str))


def corpus_texts(corpus: str):
    """The texts of a corpus spec (module docstring), in a fixed order."""
    if corpus == "stdlib":
        from .zoo import stdlib_sources
        documents, _ = stdlib_sources.list_documents(stdlib_sources.read_file_list())
        yield from (d.text for d in documents if d.split == "train")
        return
    path = Path(corpus).expanduser()
    if not path.exists():
        raise SpecirError(f"the ranking corpus {corpus!r} does not exist", path=str(path),
                          hint='give "stdlib" or a text / JSONL file or folder of your traffic')
    for f in _files(path):
        try:
            yield from _jsonl_texts(f) if f.suffix == ".jsonl" else (f.read_text(encoding="utf-8", errors="replace"),)
        except OSError as exc:
            raise SpecirError(f"cannot read the ranking corpus file {f}: {exc.strerror}", path=str(f),
                              hint="give a readable text / JSONL file or folder") from None


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.suffix in TEXT_SUFFIXES and p.is_file()) if path.is_dir() else [path]


def _stamp(corpus: str) -> tuple:
    """What a ranking depends on besides the tokenizer: the corpus files' sizes and times (a path), or
    this interpreter's version (stdlib)."""
    if corpus == "stdlib":
        import sys
        return (sys.version,)
    path = Path(corpus).expanduser()
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in _files(path)) if path.exists() else ()


def ranked_ids(folder: str, vocab: int, corpus: str = "stdlib") -> tuple[int, ...]:
    return _ranked(str(folder), int(vocab), corpus, _stamp(corpus))


@lru_cache(maxsize=8)
def _ranked(folder: str, vocab: int, corpus: str, stamp: tuple) -> tuple[int, ...]:
    from .runtime.tokenizer import load_tokenizer
    tokenizer = load_tokenizer(str(folder))
    texts = [t for t in corpus_texts(corpus) if t]
    total = sum(len(t) for t in texts)
    share = min(1.0, CORPUS_CHARS / max(total, 1))  # every text's first `share` of it: a sample of all of them
    counts: Counter = Counter()
    for text in texts:
        text = text[: max(1, round(len(text) * share))]
        counts.update(t for t in tokenizer(text, add_special_tokens=False)["input_ids"] if 0 <= t < vocab)
    if not counts:
        raise SpecirError(f"the ranking corpus {corpus!r} gave no tokens", hint="give a corpus with text in it")
    return tuple(sorted(range(vocab), key=lambda t: (-counts.get(t, 0), t)))
