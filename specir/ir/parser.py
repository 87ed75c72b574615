"""Text -> IR. Records source locations; every syntax error is a SpecirError at file:line:col."""
from __future__ import annotations

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
        self.text, self.file = text, file

    def _loc(self, meta) -> SourceLocation | None:
        if getattr(meta, "empty", True):
            return None
        return location_in(self.text, self.file, meta.line, meta.column)

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
        keys = [k for k, _ in pairs]
        for k in keys:
            if keys.count(k) > 1:
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
        names = [m.name for m in models]
        for m in models:
            if names.count(m.name) > 1:
                raise SpecirError(f"model @{m.name} is defined twice", location=m.loc,
                                  hint="give each model its own @name")
        return Pipeline(str(items[0]), attrs, models, step, loc=self._loc(meta), source_file=self.file)

    def start(self, items):
        return items[0]


def _unquote(token: str) -> str:
    return json.loads(str(token))


def parse(text: str, file: str = "<string>") -> Pipeline:
    """Parse a `.spec` text. Raises SpecirError with file:line:col on any syntax error."""
    try:
        tree = _lark().parse(text)
    except lark.exceptions.UnexpectedInput as exc:
        raise _syntax_error(exc, text, file) from None
    try:
        return _Builder(text, file).transform(tree)
    except lark.exceptions.VisitError as exc:
        if isinstance(exc.orig_exc, SpecirError):
            raise exc.orig_exc from None
        raise


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
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecirError(f"cannot read {path}: {exc}", path=str(path)) from None
    return parse(text, str(path))


def _syntax_error(exc: lark.exceptions.UnexpectedInput, text: str, file: str) -> SpecirError:
    line, column = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
    if line < 1:  # unexpected end of input
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    loc = location_in(text, file, line, column)
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "end of input"
        return SpecirError(f"syntax error: unexpected character {char!r}", location=loc,
                           hint=_expected_hint(exc))
    if isinstance(exc, lark.exceptions.UnexpectedEOF):
        return SpecirError("syntax error: unexpected end of input", location=loc,
                           hint=_expected_hint(exc) or "a '}' may be missing")
    token = getattr(exc, "token", None)
    shown = "end of input" if token is None or token.type == "$END" else repr(str(token))
    return SpecirError(f"syntax error: unexpected {shown}", location=loc, hint=_expected_hint(exc))


def _expected_hint(exc) -> str | None:
    expected = getattr(exc, "expected", None) or getattr(exc, "allowed", None)
    if not expected:
        return None
    names = sorted({_TOKEN_NAMES.get(e, repr(e.lower()) if e.isupper() else e) for e in expected})
    if len(names) > 8:
        names = names[:8] + ["..."]
    return "expected " + ", ".join(names)
