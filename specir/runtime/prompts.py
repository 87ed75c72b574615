"""Prompt sources for run/check/bench: a JSONL prompts file (one object a line with `prompt`
text or `prompt_ids`, other fields ignored) or a shipped workload by name."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import SourceLocation, SpecirError
from .tokenizer import check_text, encode


def read_prompts_file(path: str | Path) -> list[dict]:
    path = Path(path)
    jsonl = 'a JSONL file, one {"prompt": "..."} or {"prompt_ids": [...]} per line'
    if path.is_dir():
        raise SpecirError(f"--prompts {str(path)!r} is a folder, not a prompts file", path=str(path), hint=jsonl)
    try:
        lines = path.read_text().split("\n")
    except FileNotFoundError:
        raise SpecirError(f"no such prompts file: {path}", path=str(path), hint=jsonl) from None
    except UnicodeDecodeError as exc:
        from ..ir.parser import not_text_error
        raise not_text_error(path, exc, jsonl + " (UTF-8 text)") from None
    except OSError as exc:
        raise SpecirError(f"cannot read {path}: {exc.strerror or exc}", path=str(path), hint=jsonl) from None
    records = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        loc = SourceLocation(str(path), n, 1, line)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecirError(f"invalid JSON: {exc.msg}", location=SourceLocation(str(path), n, exc.colno, line),
                              hint='each line is one JSON object, e.g. {"prompt": "def f("}') from None
        if not isinstance(obj, dict) or not ("prompt" in obj or "prompt_ids" in obj):
            raise SpecirError("a prompt line needs a `prompt` (text) or `prompt_ids` (list of ints) field",
                              location=loc, hint='e.g. {"prompt": "def f("}')
        if "prompt" in obj and "prompt_ids" in obj:
            raise SpecirError("a prompt line gives both `prompt` and `prompt_ids`; which one is the prompt?",
                              location=loc, hint="keep one of them on each line")
        if "prompt_ids" in obj:
            ids = obj["prompt_ids"]
            if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise SpecirError("`prompt_ids` must be a list of integers", location=loc,
                                  hint='e.g. {"prompt_ids": [1, 2, 3]}')
        elif not isinstance(obj["prompt"], str):
            raise SpecirError("`prompt` must be a string", location=loc, hint='e.g. {"prompt": "def f("}')
        else:
            check_text(obj["prompt"], "the prompt", location=loc)
        obj["_line"] = n
        records.append(obj)
    if not records:
        raise SpecirError(f"{path} holds no prompts", path=str(path), hint=jsonl)
    return records


def to_ids(records: list[dict], tokenizer_folder: str, vocab: int) -> list[list[int]]:
    out = []
    for r in records:
        ids = list(r["prompt_ids"]) if "prompt_ids" in r else encode(tokenizer_folder, r["prompt"])
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad:
            where = f" (line {r['_line']})" if "_line" in r else ""
            shown = bad[0] if abs(bad[0]) < 10**24 else f"{str(bad[0])[:12]}..."
            raise SpecirError(f"token id {shown} is outside the vocabulary of {vocab}{where}",
                              hint=f"prompt ids must come from the target's tokenizer: 0 to {vocab - 1}")
        out.append(ids)
    return out


def workload_records(name: str | None, limit: int | None) -> list[dict]:
    """Prompts of one shipped workload, or of every workload (`None`), `limit` from each."""
    from ..zoo import workloads
    names = [name] if name else workloads.names()
    if name and name not in workloads.names():
        raise SpecirError(f"unknown workload {name!r}", hint="workloads: " + ", ".join(workloads.names()))
    records = []
    for n in names:
        rows = workloads.load(n)
        records += rows[:limit] if limit else rows
    return records
