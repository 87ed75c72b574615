"""Shipped workloads and user prompt files.

A shipped workload is `specir/zoo/workloads/<name>.jsonl`, one JSON object a line:

    {"id": str,              # "<workload>-<nnn>", unique in the file
     "workload": str,        # the workload's name
     "prompt": str,          # text; at most 384 tokens of the zoo tokenizer
     "source": str,          # the held-out stdlib document it was cut from, relative to the
                             # stdlib root ("pydoc_data/topics.py:<topic>" for pydoc topics)
     "max_new_tokens": int}  # tokens to generate; prompt + generation <= 512

Names: code-completion, docstrings, refactor, prose (see docs/ZOO.md for how each is cut).

A user prompts file (`specir check --prompts FILE.jsonl`) is JSONL with, per line, `prompt` (text)
or `prompt_ids` (a list of token ids); other fields are allowed and ignored.
"""
from __future__ import annotations

import json
from pathlib import Path

from specir.errors import SpecirError, SourceLocation

WORKLOADS_DIR = Path(__file__).parent
NAMES = ("code-completion", "docstrings", "refactor", "prose")
SCHEMA = {"id": str, "workload": str, "prompt": str, "source": str, "max_new_tokens": int}


def names() -> list[str]:
    """Names of the shipped workloads."""
    return [n for n in NAMES if (WORKLOADS_DIR / f"{n}.jsonl").exists()]


def path_of(name: str) -> Path:
    path = WORKLOADS_DIR / f"{name}.jsonl"
    if name not in NAMES or not path.exists():
        raise SpecirError(f"unknown workload '{name}'", hint=f"shipped workloads: {', '.join(names())}")
    return path


def load(name: str) -> list[dict]:
    """The prompts of a shipped workload, each a dict of the schema above."""
    path = path_of(name)
    records = []
    for line_no, obj in _json_lines(path):
        for key, kind in SCHEMA.items():
            if not isinstance(obj.get(key), kind):
                raise _error(path, line_no, f"field '{key}' must be a {kind.__name__}",
                             "shipped workloads follow the schema in specir/zoo/workloads/__init__.py")
        records.append(obj)
    return records


def load_prompts_file(path: str | Path) -> list[dict]:
    """Prompts of a user JSONL file: dicts with `prompt` (str) or `prompt_ids` (list of int),
    plus `id` (the given one, else "<file>:<line>") and `max_new_tokens` when the line has one."""
    path = Path(path)
    if not path.is_file():
        raise SpecirError(f"prompts file {path} does not exist", path=str(path),
                          hint="give a JSONL file with one {\"prompt\": ...} object a line")
    records = []
    for line_no, obj in _json_lines(path):
        record = {"id": str(obj.get("id", f"{path.name}:{line_no}"))}
        if "prompt" in obj:
            if not isinstance(obj["prompt"], str) or not obj["prompt"]:
                raise _error(path, line_no, "'prompt' must be a non-empty string", 'e.g. {"prompt": "def f("}')
            record["prompt"] = obj["prompt"]
        elif "prompt_ids" in obj:
            ids = obj["prompt_ids"]
            if (not isinstance(ids, list) or not ids or
                    not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids)):
                raise _error(path, line_no, "'prompt_ids' must be a non-empty list of token ids (ints >= 0)",
                             'e.g. {"prompt_ids": [1, 2, 3]}')
            record["prompt_ids"] = ids
        else:
            raise _error(path, line_no, "the line has neither 'prompt' nor 'prompt_ids'",
                         'write {"prompt": "text"} or {"prompt_ids": [1, 2, 3]}')
        if "max_new_tokens" in obj:
            if not isinstance(obj["max_new_tokens"], int) or obj["max_new_tokens"] < 1:
                raise _error(path, line_no, "'max_new_tokens' must be a positive integer", 'e.g. "max_new_tokens": 64')
            record["max_new_tokens"] = obj["max_new_tokens"]
        records.append(record)
    if not records:
        raise SpecirError(f"prompts file {path} holds no prompt", path=str(path),
                          hint="give a JSONL file with one {\"prompt\": ...} object a line")
    return records


def resolve(name_or_path: str) -> list[dict]:
    """A shipped workload by name, or a user prompts file by path."""
    if name_or_path in NAMES:
        return load(name_or_path)
    if name_or_path.endswith(".jsonl") or Path(name_or_path).exists():
        return load_prompts_file(name_or_path)
    raise SpecirError(f"'{name_or_path}' is neither a shipped workload nor a file",
                      hint=f"shipped workloads: {', '.join(names())}")


def _json_lines(path: Path):
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecirError(f"{path} is not UTF-8 text", path=str(path), hint="save the prompts file as UTF-8") from None
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecirError(f"invalid JSON: {exc.msg}",
                              location=SourceLocation(str(path), line_no, exc.colno, line),
                              hint="each line must be one JSON object") from None
        if not isinstance(obj, dict):
            raise _error(path, line_no, "each line must be a JSON object", 'e.g. {"prompt": "def f("}', line=line)
        yield line_no, obj


def _error(path: Path, line_no: int, message: str, hint: str | None = None,
           line: str = "") -> SpecirError:
    return SpecirError(message, location=SourceLocation(str(path), line_no, 1, line), hint=hint)
