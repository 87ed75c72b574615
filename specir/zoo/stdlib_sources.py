"""The zoo's corpus sources: documents read from the Python standard library of this machine.

A *document* is one unit of the corpus and of the train / held-out split:
- every UTF-8 `*.py` file under the stdlib (tests included), named by its path relative to the
  stdlib root, except the machine-specific `_sysconfigdata_*` module, generated codec tables
  (`encodings/*` holding "Python Character Mapping Codec") and `pydoc_data/topics.py`;
- each topic of `pydoc_data/topics.py` (the language reference and library prose that pydoc
  shows), named `pydoc_data/topics.py:<topic>`;
- every UTF-8 `*.txt` / `*.rst` file outside test folders, and `idlelib/help.html` as plain text.
Files under `site-packages`, `lib-dynload`, `config-*` and `__pycache__` never count. A file
that is not valid UTF-8 is dropped.

The split is a fixed function of the document name (a salted SHA-1), so it is the same on every
machine and Python version: 5% of code documents and 20% of prose documents are held out.
`data/stdlib-files.txt` is the fixed list of documents that the shipped pair was built from
(Python 3.11.7); `list_documents(names=...)` reads exactly those and reports the missing.
"""
from __future__ import annotations

import ast
import hashlib
import html.parser
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from specir.errors import SpecirError

FILE_LIST = Path(__file__).parent / "data" / "stdlib-files.txt"
TOPICS_FILE = "pydoc_data/topics.py"
HELD_OUT_PERCENT = {"code": 5, "prose": 20}
_SKIP_DIRS = {"site-packages", "lib-dynload", "__pycache__"}


@dataclass(frozen=True)
class Document:
    """One corpus document: `name` (stdlib-relative, `file:topic` for pydoc topics), `kind`
    ("code" or "prose"), its `text`, and its `split` ("train" or "heldout"; by default the
    fixed function `split_of` of the name)."""

    name: str
    kind: str
    text: str
    split: str = ""

    def __post_init__(self):
        if not self.split:
            object.__setattr__(self, "split", split_of(self.name, self.kind))


def split_of(name: str, kind: str) -> str:
    """The fixed train / held-out assignment of a document name."""
    digest = hashlib.sha1(f"specir-zoo-split:{name}".encode()).hexdigest()
    return "heldout" if int(digest, 16) % 100 < HELD_OUT_PERCENT[kind] else "train"


def stdlib_root() -> Path:
    """The running interpreter's standard-library folder."""
    return Path(sysconfig.get_paths()["stdlib"])


def _read_utf8(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (UnicodeDecodeError, OSError):
        return None


class _HtmlText(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
        elif tag in ("p", "div", "h1", "h2", "h3", "li", "pre", "dt", "dd", "tr"):
            self.parts.append("\n")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def html_to_text(source: str) -> str:
    parser = _HtmlText()
    parser.feed(source)
    lines = [line.rstrip() for line in "".join(parser.parts).splitlines()]
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip() + "\n"


def pydoc_topics(source: str) -> dict[str, str]:
    """The `topics` dict of a `pydoc_data/topics.py` source, read without executing it."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "topics" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def _is_candidate(rel: str) -> tuple[bool, str]:
    parts = rel.split("/")
    if any(p in _SKIP_DIRS or p.startswith("config-") for p in parts[:-1]):
        return False, ""
    name = parts[-1]
    if name.endswith(".py"):
        return not name.startswith("_sysconfigdata_"), "code"
    in_tests = any(p in ("test", "tests", "idle_test") for p in parts[:-1])
    if name.endswith((".txt", ".rst")) and not in_tests:
        return True, "prose"
    if rel == "idlelib/help.html":
        return True, "prose"
    return False, ""


def _documents_of_file(root: Path, rel: str, kind: str) -> list[Document]:
    text = _read_utf8(root / rel)
    if text is None or not text.strip():
        return []
    if rel == TOPICS_FILE:
        return [Document(f"{rel}:{key}", "prose", value) for key, value in
                sorted(pydoc_topics(text).items()) if value.strip()]
    if rel.endswith(".html"):
        return [Document(rel, kind, html_to_text(text))]
    if rel.startswith("encodings/") and "Python Character Mapping Codec" in text:
        return []
    return [Document(rel, kind, text)]


def scan_documents(root: Path | None = None) -> list[Document]:
    """Every document of the stdlib at `root` under the rules above, sorted by name."""
    root = root or stdlib_root()
    found: list[Document] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("config-"))
        for filename in sorted(filenames):
            rel = (Path(dirpath) / filename).relative_to(root).as_posix()
            ok, kind = _is_candidate(rel)
            if ok:
                found.extend(_documents_of_file(root, rel, kind))
    return sorted(found, key=lambda d: d.name)


def read_file_list(path: Path = FILE_LIST) -> list[str]:
    """Document names of a file list (one a line; `#` comments and blank lines ignored)."""
    if not path.exists():
        raise SpecirError(f"file list {path} does not exist", path=str(path),
                          hint="run `specir zoo corpus --rescan` to derive one from this machine's stdlib")
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line.split()[0])
    return names


def write_file_list(documents: list[Document], path: Path, python_version: str) -> None:
    lines = [f"# specir zoo corpus: documents of the Python {python_version} standard library",
             "# name  kind  split  (see specir/zoo/stdlib_sources.py for the rules)"]
    lines += [f"{d.name}\t{d.kind}\t{d.split}" for d in documents]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def list_documents(names: list[str] | None = None, root: Path | None = None
                   ) -> tuple[list[Document], list[str]]:
    """The documents named in `names` (default: every document the rules find), and the names
    that this machine's stdlib lacks or holds as non-UTF-8."""
    scanned = scan_documents(root)
    if names is None:
        return scanned, []
    by_name = {d.name: d for d in scanned}
    return [by_name[n] for n in names if n in by_name], [n for n in names if n not in by_name]
