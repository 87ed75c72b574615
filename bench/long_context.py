"""A long-context workload cut from the shipped corpus: prompts of `--tokens` tokens (8k+) for
`specir bench --prompts` (and `specir check --prompts`).

    python bench/long_context.py --out long.jsonl [--tokens 8192] [--count 8] [--tokenizer DIR]

Each prompt is held-out documents of the shipped corpus file list (the Python standard library's
sources and docs, split by specir/zoo/stdlib_sources.split_of: never trained on), concatenated in
name order from a start document that differs per prompt and cut at a line end once it reaches
`--tokens` tokens of the tokenizer (default: the shipped zoo target's). Lines are `prompt_ids`
(exact lengths, whatever tokenizer the pipeline's `text` path would use) plus `source` (the first
document) and `tokens`. Deterministic: the same stdlib gives the same file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def long_prompts(tokenizer, tokens: int, count: int) -> list[dict]:
    from specir.zoo.stdlib_sources import list_documents, read_file_list
    docs, _ = list_documents(read_file_list())
    docs = [d for d in docs if d.split == "heldout" and d.text.strip()] or [d for d in docs if d.text.strip()]
    if not docs:
        raise SystemExit("no corpus documents found on this machine (the shipped file list names none of its "
                         "stdlib files); run `specir zoo corpus --rescan`")
    out = []
    for n in range(count):
        start = (n * len(docs)) // count
        ids: list[int] = []
        i = start
        while len(ids) < tokens:
            for line in docs[i % len(docs)].text.splitlines(keepends=True):
                ids += tokenizer.encode(line).ids
                if len(ids) >= tokens:
                    break
            i += 1
            if i - start > len(docs):
                raise SystemExit(f"the corpus holds fewer than {tokens} tokens")
        out.append({"id": f"long-{n:03d}", "workload": "long-context", "source": docs[start].name,
                    "tokens": len(ids), "prompt_ids": ids})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--tokenizer", help="a checkpoint folder with tokenizer.json (default: the zoo target)")
    a = ap.parse_args(argv)
    from specir.zoo.tokenizer import load_tokenizer
    if a.tokenizer:
        folder = Path(a.tokenizer)
    else:
        from specir.importers import resolve_source
        folder = resolve_source("zoo:code-target")
    rows = long_prompts(load_tokenizer(folder / "tokenizer.json"), a.tokens, a.count)
    Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} prompts of {min(r['tokens'] for r in rows)}+ tokens to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
