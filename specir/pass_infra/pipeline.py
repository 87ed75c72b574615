"""Pipeline strings: `pass-a{k=v,k2=v2},pass-b` -> pass instances.

Errors point into the string itself (file `-p`, line 1, the column of the offending text).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import SourceLocation, SpecirError
from . import registry
from .base import Pass

_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class PassSpec:
    name: str
    options: dict
    column: int  # 1-based column of the name
    option_columns: dict


def parse_pipeline_string(text: str) -> list[PassSpec]:
    specs, i, n = [], 0, len(text)

    def fail(msg, col, hint=None):
        raise SpecirError(msg, location=SourceLocation("-p", 1, col + 1, text), hint=hint)

    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break  # blanks (after a trailing ',', or only blanks): nothing more
        m = _NAME.match(text, i)
        if not m:
            fail(f"expected a pass name, found {text[i]!r}", i, "pipeline strings look like a{k=v},b")
        name, start = m.group(), i
        i = m.end()
        options, columns = {}, {}
        if i < n and text[i] == "{":
            close = text.find("}", i)
            if close < 0:
                fail("unclosed '{' in pass options", i, "close it with '}'")
            inner = text.find("{", i + 1, close)
            if inner >= 0:
                fail("pass options cannot nest '{'", inner, f"write {name}{{key=value,key2=value2}}, "
                     f"e.g. tree-verify{{budget=32}}")
            body_start = i + 1
            for part in _split_top(text[body_start:close]):
                piece, offset = part
                col = body_start + offset
                if not piece.strip():
                    continue
                if "=" not in piece:
                    fail(f"option {piece.strip()!r} has no value", col, "write key=value")
                key, value = piece.split("=", 1)
                key = key.strip()
                if key in options:
                    fail(f"option {key!r} is given twice", col, "keep one of them")
                options[key] = value.strip().strip('"')
                columns[key] = col + len(piece) - len(piece.lstrip())
            i = close + 1
        specs.append(PassSpec(name, options, start + 1, columns))
        while i < n and text[i] in " \t":
            i += 1
        if i < n:
            if text[i] != ",":
                fail(f"expected ',' between passes, found {text[i]!r}", i, "pipeline strings look like a{k=v},b")
            i += 1
    return specs


def _split_top(body: str):
    out, start = [], 0
    for j, c in enumerate(body):
        if c == ",":
            out.append((body[start:j], start))
            start = j + 1
    out.append((body[start:], start))
    return out


def build_passes(text: str) -> list[Pass]:
    """Instantiate the passes of a pipeline string; errors name the column."""
    passes = []
    for spec in parse_pipeline_string(text):
        try:
            cls = registry.get(spec.name)
        except SpecirError as exc:
            raise SpecirError(exc.message, location=SourceLocation("-p", 1, spec.column, text),
                              hint=exc.hint) from None
        try:
            instance = cls(**spec.options)
        except SpecirError as exc:
            key = next((k for k in spec.options if repr(k) in exc.message), None)
            col = spec.option_columns.get(key, spec.column - 1) + 1 if key else spec.column
            raise SpecirError(exc.message, location=SourceLocation("-p", 1, col, text), hint=exc.hint) from None
        # where the pass and each option stand in the string: errors the pass raises later point there
        instance.where = {"": SourceLocation("-p", 1, spec.column, text),
                          **{k: SourceLocation("-p", 1, c + 1, text) for k, c in spec.option_columns.items()}}
        passes.append(instance)
    return passes
