"""A finite search space written as a file: one pass pipeline per line.

Contract: `read_space_file(path)` returns the pipelines in file order. A line is a pipeline
string as `-p` takes it (`tree-verify{budget=64,topk=8}`); `(input)` or a line of only `-`
is the input pipeline (no passes); blank lines and text after `#` are ignored. A line that does
not parse is a SpecirError at its line and column; a file with no pipeline is one too.
"""
from __future__ import annotations

from pathlib import Path

from specir.errors import SourceLocation, SpecirError

INPUT = ("(input)", "-")


def read_space_file(path: str) -> list[str]:
    from specir.pass_infra import parse_pipeline_string
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise SpecirError(f"cannot read the space file: {e.strerror if isinstance(e, OSError) else e}", path=path,
                          hint="--space takes a text file with one pass pipeline per line") from None
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line in INPUT:
            out.append("")
            continue
        try:
            parse_pipeline_string(line)
        except SpecirError as e:
            col = raw.index(line) + (e.location.column if e.location else 1)
            raise SpecirError(e.message, location=SourceLocation(path, n, col, raw), hint=e.hint) from None
        out.append(line)
    if not out:
        raise SpecirError("the space file lists no pipeline", path=path,
                          hint="one pass pipeline per line, e.g. tree-verify{budget=64,topk=8}; (input) for none")
    return out
