"""A finite search space: pass pipelines, one per line of a file (`specir search --space FILE`).

Contract: `read_space_file(path, plugins=False)` returns the pipelines in file order. A line is
a pipeline string as `-p` takes it (`tree-verify{budget=64,topk=8}`); `(input)` or a line of
only `-` is the input pipeline (returned as ""); blank lines and text after `#` are ignored.
Every pass name and option is checked against the registry (`check_pipeline`; names the
registry lacks pass when --plugin files are given: the sandbox describes those later). A line
that does not parse or check is a SpecirError at its line and column; so is a file with no
pipeline.
"""
from __future__ import annotations

from pathlib import Path

from specir.errors import SourceLocation, SpecirError

INPUT = ("(input)", "-")


def check_pipeline(text: str, plugins: bool = False) -> None:
    """Build the passes of `text` as `-p` does (unknown names, options and values are SpecirErrors
    located in `text`); with `plugins`, a pipeline naming a pass the registry lacks is left to the
    search (a --plugin pass, described in the sandbox)."""
    from specir.pass_infra import parse_pipeline_string
    from specir.pass_infra.pipeline import build_passes
    from specir.pass_infra.registry import all_passes
    if plugins and any(spec.name not in all_passes() for spec in parse_pipeline_string(text)):
        return
    build_passes(text)


def read_space_file(path: str, plugins: bool = False) -> list[str]:
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
            check_pipeline(line, plugins)
        except SpecirError as e:
            col = raw.index(line) + (e.location.column if e.location else 1)
            raise SpecirError(e.message, location=SourceLocation(path, n, col, raw), hint=e.hint) from None
        out.append(line)
    if not out:
        raise SpecirError("the space file lists no pipeline", path=path,
                          hint="one pass pipeline per line, e.g. tree-verify{budget=64,topk=8}; (input) for none")
    return out
