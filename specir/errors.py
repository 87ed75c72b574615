"""User-facing errors.

Contract: every error a user can cause is a `SpecirError` carrying one message, an optional
source location (file, line, column, the offending line) and a hint. The CLI prints it with
`format()` and exits with status 2; no traceback unless `--debug`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A 1-based position in a named source (a file path or '<string>')."""

    file: str
    line: int
    column: int
    source_line: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class SpecirError(Exception):
    """An error in user input: message, optional location, optional hint."""

    exit_code = 2

    def __init__(self, message: str, *, location: SourceLocation | None = None,
                 hint: str | None = None, path: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint
        self.path = path  # a file or folder the error is about, when there is no line/column

    def format(self) -> str:
        """The one message the CLI prints: `where: error: message`, caret line, hint."""
        where = str(self.location) if self.location else (self.path or "specir")
        lines = [f"{where}: error: {self.message}"]
        if self.location and self.location.source_line:
            text = self.location.source_line.rstrip("\r\n")
            lines.append(f"    {text}")
            lines.append("    " + " " * max(self.location.column - 1, 0) + "^")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def location_in(text: str, file: str, line: int, column: int) -> SourceLocation:
    """Build a location, attaching the offending source line from `text`."""
    lines = text.split("\n")  # lines end at \n only, as the lexer counts them
    source_line = lines[line - 1].rstrip("\r") if 1 <= line <= len(lines) else ""
    return SourceLocation(file, line, column, source_line)
