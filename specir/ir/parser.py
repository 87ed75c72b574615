"""Text -> IR. Records source locations; every syntax error is a SpecirError at file:line:col."""
from __future__ import annotations

import gc
import json
from functools import lru_cache
from pathlib import Path

import lark
from lark import Token, Transformer, v_args

from ..errors import SourceLocation, SpecirError, location_in
from .nodes import Attrs, Graph, Model, Op, Pipeline, Step, Symbol, Weight
from .types import TensorType, Type

GRAMMAR = Path(__file__).with_name("grammar.lark")

_TOKEN_NAMES = {
    "NAME": "a name", "VALUE": "a %value", "RESULT": "a %value", "SYMBOL": "a @model", "INT": "an integer",
    "FLOAT": "a number", "STRING": "a string", "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('",
    "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "COLON": "':'", "EQUAL": "'='",
    "LESSTHAN": "'<'", "MORETHAN": "'>'", "__ANON_0": "'->'",
}


@lru_cache(maxsize=1)
def _lark() -> lark.Lark:
    return lark.Lark(GRAMMAR.read_text(), parser="lalr", propagate_positions=True,
                     maybe_placeholders=False)


class _Builder(Transformer):
    def __init__(self, text: str, file: str):
        super().__init__()
        self.file = file
        self.lines = text.split("\n")  # once: a location costs O(1), not a scan of the file

    def _loc(self, meta) -> SourceLocation | None:
        if getattr(meta, "empty", True):
            return None
        line = self.lines[meta.line - 1].rstrip("\r") if 1 <= meta.line <= len(self.lines) else ""
        return SourceLocation(self.file, meta.line, meta.column, line)

    # values -------------------------------------------------------------
    def int(self, items):
        return int(items[0])

    def float(self, items):
        return float(items[0])

    def string(self, items):
        return _unquote(items[0])

    def symbol(self, items):
        return Symbol(str(items[0])[1:])

    def true(self, _):
        return True

    def false(self, _):
        return False

    def list(self, items):
        return tuple(i for i in items if i is not None)

    def attr(self, items):
        return (str(items[0]), items[1])

    @v_args(meta=True)
    def attr_dict(self, meta, items):
        pairs = [i for i in items if i is not None]
        if len({k for k, _ in pairs}) != len(pairs):
            seen = set()
            k = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise SpecirError(f"attribute {k!r} is given twice", location=self._loc(meta),
                              hint="keep one of them")
        return Attrs(pairs)

    def attributes(self, items):
        return items[0]

    def type(self, items):
        params = tuple(int(p) if p.type == "INT" else str(p) for p in items[1:] if p is not None)
        return Type(str(items[0]), params)

    def tensor_type(self, items):
        return TensorType(str(items[0]), tuple(int(d) for d in items[1:] if d is not None))

    def param(self, items):
        return (str(items[0]), items[1])

    # structure ------------------------------------------------------------
    @v_args(meta=True)
    def op(self, meta, items):
        items = [i for i in items if i is not None]
        result = None
        if items and isinstance(items[0], Token) and items[0].type == "RESULT":
            result = str(items.pop(0))
        name = str(items.pop(0))
        operands, attrs, type_ = [], Attrs(), None
        for item in items:
            if isinstance(item, Token):
                operands.append(str(item))
            elif isinstance(item, Attrs):
                attrs = item
            elif isinstance(item, Type):
                type_ = item
        return Op(name, tuple(operands), attrs, result, type_, loc=self._loc(meta))

    @v_args(meta=True)
    def weight(self, meta, items):
        attrs = items[2] if len(items) > 2 and items[2] is not None else Attrs()
        return Weight(_unquote(items[0]), items[1], attrs, loc=self._loc(meta))

    @v_args(meta=True)
    def graph(self, meta, items):
        items = [i for i in items if i is not None]
        params = tuple(i for i in items if isinstance(i, tuple))
        result_type = next(i for i in items if isinstance(i, Type))
        ops = tuple(i for i in items if isinstance(i, Op))
        result = str(items[-1])
        return Graph(params, ops, result, result_type, loc=self._loc(meta))

    @v_args(meta=True)
    def step(self, meta, items):
        items = [i for i in items if i is not None]
        params = tuple(i for i in items if isinstance(i, tuple))
        ops = tuple(i for i in items if isinstance(i, Op))
        return Step(params, ops, loc=self._loc(meta))

    @v_args(meta=True)
    def model_import(self, meta, items):
        attrs = items[2] if len(items) > 2 and items[2] is not None else Attrs()
        return Model(str(items[0])[1:], attrs, import_path=_unquote(items[1]), loc=self._loc(meta))

    @v_args(meta=True)
    def model_def(self, meta, items):
        items = [i for i in items if i is not None]
        attrs = next((i for i in items[1:] if isinstance(i, Attrs)), Attrs())
        weights = tuple(i for i in items if isinstance(i, Weight))
        graph = next(i for i in items if isinstance(i, Graph))
        return Model(str(items[0])[1:], attrs, weights, graph, loc=self._loc(meta))

    @v_args(meta=True)
    def pipeline(self, meta, items):
        items = [i for i in items if i is not None]
        attrs = next((i for i in items[1:] if isinstance(i, Attrs)), Attrs())
        models = tuple(i for i in items if isinstance(i, Model))
        step = next((i for i in items if isinstance(i, Step)), None)
        seen = set()
        for m in models:
            if m.name in seen:
                raise SpecirError(f"model @{m.name} is defined twice", location=m.loc,
                                  hint="give each model its own @name")
            seen.add(m.name)
        return Pipeline(str(items[0]), attrs, models, step, loc=self._loc(meta), source_file=self.file)

    def start(self, items):
        return items[0]


def _unquote(token: str) -> str:
    return json.loads(str(token))


MAX_NESTING = 32  # attribute values nested deeper than this are refused (the transformer recurses)
MAX_TEXT_CHARS = 512 * 2**20  # a .spec larger than this is refused up front


def parse(text: str, file: str = "<string>") -> Pipeline:
    """Parse a `.spec` text. Raises SpecirError with file:line:col on any syntax error.
    Linear in the text; attribute values nest at most MAX_NESTING deep."""
    if len(text) > MAX_TEXT_CHARS:
        raise SpecirError(f"{file} has {len(text)} characters; specir reads pipelines of up to {MAX_TEXT_CHARS} "
                          f"characters", path=file, hint="a pipeline this large is not a hand-written one: "
                          "split it, or keep large data in the checkpoint")
    _check_text(text, file)
    collect = gc.isenabled()
    gc.disable()  # the parse allocates millions of small objects and frees none: a collection only costs
    try:
        try:
            tree = _lark().parse(text)
        except lark.exceptions.UnexpectedInput as exc:
            raise _syntax_error(exc, text, file) from None
        _check_nesting(tree, text, file)
        try:
            return _Builder(text, file).transform(tree)
        except lark.exceptions.VisitError as exc:
            if isinstance(exc.orig_exc, SpecirError):
                raise exc.orig_exc from None
            raise
    finally:
        if collect:
            gc.enable()


def _check_text(text: str, file: str) -> None:
    """A NUL byte means a binary file, not a pipeline: say so, with where."""
    at = text.find("\x00")
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        raise SpecirError(f"{file} is a binary file, not a .spec text (a NUL byte at line {line}, column {column}, "
                          f"offset {at})", location=location_in(text, file, line, column),
                          hint="give the .spec text file that specir init or specir opt writes")


_NESTED = frozenset({"attr_dict", "list"})


def _check_nesting(tree, text: str, file: str) -> None:
    """Refuse attribute values nested deeper than MAX_NESTING (iteratively: no recursion here)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        if node.data in _NESTED:
            depth += 1
            if depth > MAX_NESTING:
                meta = node.meta
                line, column = (meta.line, meta.column) if not getattr(meta, "empty", True) else (1, 1)
                raise SpecirError(f"attribute values are nested more than {MAX_NESTING} deep",
                                  location=location_in(text, file, line, column),
                                  hint=f"specir reads at most {MAX_NESTING} levels of {{...}} / [...] inside "
                                       f"attributes")
        stack.extend((child, depth) for child in node.children)


def parse_file(path: str | Path) -> Pipeline:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecirError(f"no such file: {path}", path=str(path),
                          hint="give the path of a .spec file (specir init writes one)") from None
    except IsADirectoryError:
        hint = (f"that is a checkpoint folder; write a pipeline for it with `specir init --target-model {path} "
                f"> p.spec`" if (path / "config.json").is_file() else "give the path of a .spec file")
        raise SpecirError(f"{path} is a folder, not a .spec file", path=str(path), hint=hint) from None
    except UnicodeDecodeError as exc:
        raise not_text_error(path, exc, "give the .spec text file that specir init or specir opt writes") from None
    except OSError as exc:
        raise SpecirError(f"cannot read {path}: {exc.strerror or exc}", path=str(path),
                          hint="give the path of a readable .spec file") from None
    return parse(text, str(path))


def not_text_error(path: Path, exc: UnicodeDecodeError, hint: str) -> SpecirError:
    """A file that is not UTF-8 text: name the first bad byte by line, column and offset."""
    data = exc.object if isinstance(exc.object, (bytes, bytearray)) else b""
    at = exc.start
    line = data.count(b"\n", 0, at) + 1
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1
    shown = data[:at].split(b"\n")[-1].decode("utf-8", "replace")
    kind = "a binary file" if b"\x00" in data[:4096] else "not UTF-8 text"
    return SpecirError(f"{path} is {kind}: byte 0x{data[at]:02x} at line {line}, column {column} (offset {at}) "
                       f"is not UTF-8", location=SourceLocation(str(path), line, column, shown), hint=hint)


def _syntax_error(exc: lark.exceptions.UnexpectedInput, text: str, file: str) -> SpecirError:
    line, column = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
    if line < 1:  # unexpected end of input
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    loc = location_in(text, file, line, column)
    ascii_error = _non_ascii_name(exc, text, file)
    if ascii_error is not None:
        return ascii_error
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "end of input"
        return SpecirError(f"syntax error: unexpected character {char!r}", location=loc,
                           hint=_expected_hint(exc) or "check the spelling against docs/IR.md")
    if isinstance(exc, lark.exceptions.UnexpectedEOF):
        return SpecirError("syntax error: unexpected end of input", location=loc,
                           hint=_expected_hint(exc) or "a '}' may be missing")
    token = getattr(exc, "token", None)
    shown = "end of input" if token is None or token.type == "$END" else repr(str(token))
    return SpecirError(f"syntax error: unexpected {shown}", location=loc, hint=_expected_hint(exc))


def _non_ascii_name(exc, text: str, file: str) -> SpecirError | None:
    """A non-ASCII letter in or right after a name (`%réponse`, `@modèle`, `opé`): identifiers are ASCII."""
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        pos = exc.pos_in_stream
        candidates = (pos, pos + 1) if text[pos:pos + 1] in ("%", "@") else (pos,)
    else:
        token = getattr(exc, "token", None)
        end = getattr(token, "end_pos", None)
        if end is None or token.type == "$END":
            return None
        candidates = (end,)
    at = next((i for i in candidates if i < len(text) and not text[i].isascii() and text[i].isalnum()), None)
    if at is None:
        return None
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return SpecirError(f"syntax error: {text[at]!r} cannot appear in a name: identifiers are ASCII",
                       location=location_in(text, file, line, column),
                       hint="names, %values and @models use A-Z, a-z, 0-9, _ and . (strings may hold any text)")


def _expected_hint(exc) -> str | None:
    expected = getattr(exc, "expected", None) or getattr(exc, "allowed", None)
    if not expected:
        return None
    names = sorted({_TOKEN_NAMES.get(e, repr(e.lower()) if e.isupper() else e) for e in expected})
    if len(names) > 8:
        names = names[:8] + ["..."]
    return "expected " + ", ".join(names)
