"""`specir zoo workloads`: cut the shipped workload prompts from a corpus's held-out documents.

Every prompt comes from a held-out document (never trained on), is at most 384 tokens of the
corpus tokenizer, and prompt + max_new_tokens <= 512 (the training window). Deterministic: the
same corpus gives the same files. At most `MAX_PER_DOCUMENT` prompts of a workload share a source.
- code-completion: the code before a point inside an indented statement; the model continues it.
- docstrings: a function's context and header ending in an opening `\"\"\"` (write the
  docstring), or code ending in a `# ` comment start (write the comment).
- refactor: a function, a comment naming a rename (`old` -> `new`), and the renamed function's
  first line; the model rewrites the rest, mostly copying the original (repetition-heavy edit).
- prose: documentation text (pydoc topics, IDLE and email docs, module docstrings) ending at a
  sentence end; the model continues the prose.
"""
from __future__ import annotations

import ast
import io
import json
import random
import re
import textwrap
import tokenize
from pathlib import Path

from specir.zoo import corpus as corpus_mod
from specir.zoo.tokenizer import load_tokenizer
from specir.zoo.workloads import NAMES, WORKLOADS_DIR

MAX_PROMPT_TOKENS = 384
WINDOW_TOKENS = 512
MAX_PER_DOCUMENT = 3
NEW_TOKENS = {"code-completion": 128, "docstrings": 96, "prose": 96}
RENAMES = ("item", "value", "result", "node", "entry", "data", "obj", "arg")


class _Cutter:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def tail(self, text: str, budget: int) -> str | None:
        """The longest suffix of `text` starting at a line start with at most `budget` tokens."""
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        lo, hi = 0, len(starts) - 1
        if self.count(text[starts[hi]:]) > budget:
            return None
        while lo < hi:  # smallest line index whose suffix fits
            mid = (lo + hi) // 2
            if self.count(text[starts[mid]:]) <= budget:
                hi = mid
            else:
                lo = mid + 1
        return text[starts[lo]:]


def _code_completion(name: str, text: str, cut: _Cutter, rng: random.Random) -> list[str]:
    lines = text.splitlines(keepends=True)
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    candidates = [i for i, line in enumerate(lines)
                  if i > 20 and line.startswith("    ") and line.strip()
                  and not line.strip().startswith(("#", '"""', "'''")) and len(line.strip()) > 12]
    rng.shuffle(candidates)
    prompts = []
    for i in candidates[:MAX_PER_DOCUMENT * 3]:
        indent = len(lines[i]) - len(lines[i].lstrip())
        end = offsets[i] + indent + rng.randint(0, min(8, len(lines[i].strip()) // 2))
        prompt = cut.tail(text[:end], rng.randint(160, MAX_PROMPT_TOKENS - 16))
        if prompt and cut.count(prompt) >= 64:
            prompts.append(prompt)
        if len(prompts) == MAX_PER_DOCUMENT:
            break
    return prompts


def _functions(text: str) -> list[ast.AST]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _docstrings(name: str, text: str, cut: _Cutter, rng: random.Random) -> list[str]:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    prompts = []
    funcs = [f for f in _functions(text) if ast.get_docstring(f) and len(ast.get_docstring(f)) > 40]
    rng.shuffle(funcs)
    for f in funcs[:2]:
        doc = f.body[0]
        line = lines[doc.lineno - 1]
        start = offsets[doc.lineno - 1] + doc.col_offset
        opener = re.match(r'[rRbBuU]?("""|\'\'\')', line[doc.col_offset:])
        if not opener:
            continue
        prompt = cut.tail(text[:start + opener.end()], rng.randint(160, MAX_PROMPT_TOKENS - 16))
        if prompt and f"def {f.name}" in prompt:
            prompts.append(prompt)
    comments = [i for i, line in enumerate(lines)
                if i > 10 and re.match(r"\s*# [A-Za-z]", line) and len(line.strip()) > 20]
    rng.shuffle(comments)
    for i in comments[:MAX_PER_DOCUMENT - len(prompts)]:
        start = offsets[i] + lines[i].index("#") + 2
        prompt = cut.tail(text[:start], rng.randint(160, MAX_PROMPT_TOKENS - 16))
        if prompt and cut.count(prompt) >= 64:
            prompts.append(prompt)
    return prompts


def rename_identifier(source: str, old: str, new: str) -> str:
    """`source` with every name token `old` (not an attribute, not in strings) renamed."""
    spots = []
    prev = None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string == old and not (prev and prev.string == "."):
            spots.append(tok.start)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                            tokenize.DEDENT):
            prev = tok
    lines = source.splitlines(keepends=True)
    for row, col in reversed(spots):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)


def _refactor(name: str, text: str, cut: _Cutter, rng: random.Random) -> list[tuple[str, int]]:
    lines = text.splitlines(keepends=True)
    results = []
    funcs = _functions(text)
    rng.shuffle(funcs)
    for f in funcs:
        if len(results) == MAX_PER_DOCUMENT:
            break
        if not 6 <= f.end_lineno - f.lineno + 1 <= 30 or f.decorator_list:
            continue
        body = textwrap.dedent("".join(lines[f.lineno - 1:f.end_lineno]))
        arg_names = [a.arg for a in f.args.args + f.args.kwonlyargs if a.arg not in ("self", "cls")]
        counts = {a: len(re.findall(rf"(?<![.\w]){re.escape(a)}\b", body)) for a in arg_names}
        usable = [a for a in arg_names if len(a) >= 2 and counts[a] >= 3]
        if not usable:
            continue
        old = rng.choice(usable)
        new = next((r for r in RENAMES if not re.search(rf"\b{r}\b", body)), None)
        if new is None:
            continue
        try:
            renamed = rename_identifier(body, old, new)
        except (tokenize.TokenError, IndentationError, SyntaxError):
            continue
        first, rest = renamed.split("\n", 1) if "\n" in renamed else (renamed, "")
        prompt = (f"# Original version:\n{body.rstrip()}\n\n"
                  f"# Refactored: the argument `{old}` is renamed to `{new}`; "
                  f"the behaviour is unchanged.\n{first}\n")
        n_prompt, n_rest = cut.count(prompt), cut.count(rest)
        if n_prompt > MAX_PROMPT_TOKENS or n_rest < 16:
            continue
        results.append((prompt, min(n_rest + 4, WINDOW_TOKENS - n_prompt, 192)))
    return results


def _prose_texts(name: str, kind: str, text: str) -> list[str]:
    if kind == "prose":
        return [text]
    try:
        doc = ast.get_docstring(ast.parse(text))
    except (SyntaxError, ValueError):
        return []
    return [doc] if doc and len(doc) > 500 else []


def _prose(texts: list[str], cut: _Cutter, rng: random.Random) -> list[str]:
    prompts = []
    for text in texts:
        ends = [m.end() for m in re.finditer(r"[a-z)][.:](?=\s)", text) if m.end() > 300]
        rng.shuffle(ends)
        for end in ends[:MAX_PER_DOCUMENT]:
            prompt = cut.tail(text[:end], rng.randint(96, 256))
            if prompt and cut.count(prompt) >= 48:
                prompts.append(prompt)
            if len(prompts) >= MAX_PER_DOCUMENT:
                return prompts
    return prompts


def build_workloads(corpus: Path, out: Path | None = None, *, per_workload: int = 48,
                    seed: int = 0, log=print) -> dict[str, int]:
    """Write `<name>.jsonl` for every workload into `out` (default: the package's folder)."""
    out = out or WORKLOADS_DIR
    corpus_mod.load_meta(corpus)  # a clear error when `corpus` is not one
    cut = _Cutter(load_tokenizer(corpus / "tokenizer.json"))
    docs = corpus_mod.heldout_documents(corpus)
    pools: dict[str, list[tuple[str, str, int]]] = {n: [] for n in NAMES}
    for name, kind, text in docs:
        rng = random.Random(f"{seed}:{name}")
        if kind == "code":
            pools["code-completion"] += [(name, p, NEW_TOKENS["code-completion"])
                                         for p in _code_completion(name, text, cut, rng)]
            pools["docstrings"] += [(name, p, NEW_TOKENS["docstrings"])
                                    for p in _docstrings(name, text, cut, rng)]
            pools["refactor"] += [(name, p, n) for p, n in _refactor(name, text, cut, rng)]
        pools["prose"] += [(name, p, NEW_TOKENS["prose"])
                           for p in _prose(_prose_texts(name, kind, text), cut, rng)]
    counts = {}
    out.mkdir(parents=True, exist_ok=True)
    for workload, pool in pools.items():
        rng = random.Random(f"{seed}:{workload}")
        rng.shuffle(pool)
        chosen = sorted(pool[:per_workload], key=lambda x: (x[0], x[1]))
        with open(out / f"{workload}.jsonl", "w", encoding="utf-8") as fh:
            for i, (source, prompt, new_tokens) in enumerate(chosen):
                assert cut.count(prompt) <= MAX_PROMPT_TOKENS
                record = {"id": f"{workload}-{i:03d}", "workload": workload, "prompt": prompt,
                          "source": source, "max_new_tokens": int(new_tokens)}
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        counts[workload] = len(chosen)
        log(f"workloads: {workload}: {len(chosen)} prompts from {len({c[0] for c in chosen})} "
            f"held-out documents (pool {len(pool)})")
    return counts
