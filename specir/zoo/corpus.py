"""`specir zoo corpus`: the tokenized training corpus, built once and carried to any machine.

A corpus folder holds:
- `files.txt`       the documents used (name, kind, split), in corpus order;
- `tokenizer.json`  the byte-level BPE tokenizer, trained on the train split only;
- `train.npy`, `heldout.npy`  uint16 token ids, documents joined by `<|endoftext|>`;
- `heldout/`        the held-out documents' text (`<n>.txt`, names in `heldout/index.json`),
                    from which the workloads are cut;
- `meta.json`       Python version, counts, vocabulary size, the missing documents.
"""
from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import numpy as np

from specir.errors import SpecirError
from specir.zoo import stdlib_sources
from specir.zoo.tokenizer import EOS_ID, load_tokenizer, train_tokenizer

DEFAULT_VOCAB_SIZE = 4096


def build_corpus(out: Path, *, vocab_size: int = DEFAULT_VOCAB_SIZE, file_list: Path | None = None,
                 rescan: bool = False, log=print) -> dict:
    """Build a corpus folder at `out` from this machine's stdlib; returns its meta.

    With `rescan`, the documents are those the rules find here (and `files.txt` records them);
    otherwise those of `file_list` (default: the fixed list shipped with specir)."""
    if vocab_size > 65535:
        raise SpecirError(f"vocabulary size {vocab_size} does not fit uint16 token files",
                          hint="use --vocab-size 65535 or less")
    names = None if rescan else stdlib_sources.read_file_list(file_list or stdlib_sources.FILE_LIST)
    documents, missing = stdlib_sources.list_documents(names)
    if not documents:
        raise SpecirError("no stdlib document found", path=str(stdlib_sources.stdlib_root()),
                          hint="this Python has no standard-library sources; try --rescan on another")
    if missing:
        log(f"corpus: {len(missing)} listed documents are missing or not UTF-8 here; skipped")
    meta = write_corpus(out, documents, vocab_size=vocab_size, log=log)
    meta.update(missing_documents=missing,
                file_list="rescan" if rescan else str(file_list or "shipped"))
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def write_corpus(out: Path, documents: list[stdlib_sources.Document], *, vocab_size: int,
                 log=print) -> dict:
    """Write a corpus folder from documents (their `split` decides train or held-out)."""
    out.mkdir(parents=True, exist_ok=True)
    stdlib_sources.write_file_list(documents, out / "files.txt", platform.python_version())

    train_docs = [d for d in documents if d.split == "train"]
    held_docs = [d for d in documents if d.split == "heldout"]
    log(f"corpus: {len(train_docs)} train and {len(held_docs)} held-out documents; "
        f"training a {vocab_size}-entry BPE tokenizer")
    tokenizer = train_tokenizer((d.text for d in train_docs), vocab_size)
    tokenizer.save(str(out / "tokenizer.json"))
    tokenizer = load_tokenizer(out / "tokenizer.json")

    counts = {}
    for split, docs in (("train", train_docs), ("heldout", held_docs)):
        encoded = tokenizer.encode_batch([d.text for d in docs], add_special_tokens=False)
        ids = np.fromiter((t for e in encoded for t in (*e.ids, EOS_ID)), dtype=np.uint16)
        np.save(out / f"{split}.npy", ids)
        counts[split] = {"documents": len(docs), "tokens": int(ids.size),
                         "bytes": sum(len(d.text.encode()) for d in docs)}
        log(f"corpus: {split}: {ids.size:,} tokens from {counts[split]['bytes']:,} bytes")

    held_dir = out / "heldout"
    held_dir.mkdir(exist_ok=True)
    index = []
    for i, d in enumerate(held_docs):
        (held_dir / f"{i}.txt").write_text(d.text, encoding="utf-8")
        index.append({"file": f"{i}.txt", "name": d.name, "kind": d.kind})
    (held_dir / "index.json").write_text(json.dumps(index, indent=1))

    meta = {"python": platform.python_version(), "implementation": sys.implementation.name,
            "vocab_size": tokenizer.get_vocab_size(), "eos_id": EOS_ID, "splits": counts}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def load_meta(corpus: Path) -> dict:
    """The meta of a corpus folder, with a clear error when it is not one."""
    path = corpus / "meta.json"
    needed = [path, corpus / "tokenizer.json", corpus / "train.npy", corpus / "heldout.npy"]
    lacking = [p.name for p in needed if not p.exists()]
    if lacking:
        raise SpecirError(f"{corpus} is not a zoo corpus (missing {', '.join(lacking)})",
                          path=str(corpus), hint="build one with `specir zoo corpus --out DIR`")
    return json.loads(path.read_text())


def load_tokens(corpus: Path, split: str) -> np.ndarray:
    return np.load(corpus / f"{split}.npy", mmap_mode="r")


def heldout_documents(corpus: Path) -> list[tuple[str, str, str]]:
    """(name, kind, text) of every held-out document of a corpus."""
    held_dir = corpus / "heldout"
    index = json.loads((held_dir / "index.json").read_text())
    return [(e["name"], e["kind"], (held_dir / e["file"]).read_text(encoding="utf-8")) for e in index]
