"""IR -> canonical text. `print_pipeline(parse(print_pipeline(x))) == print_pipeline(x)`.

Canonical form: two-space indentation, attributes sorted by key, every op with a result
printed with its type, floats in Python's shortest round-trip form.
"""
from __future__ import annotations

import json
import math

from .nodes import Attrs, Graph, Model, Op, Pipeline, Step, Symbol, Weight


def format_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, Symbol):
        return f"@{value}"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, Attrs):
        return format_attrs(value)
    raise TypeError(f"cannot print attribute value {value!r}")


def format_attrs(attrs: Attrs) -> str:
    return "{" + ", ".join(f"{k} = {format_value(v)}" for k, v in attrs.items()) + "}"


def format_op(op: Op) -> str:
    parts = []
    if op.result:
        parts.append(f"{op.result} =")
    parts.append(op.name)
    line = " ".join(parts)
    if op.operands:
        line += " " + ", ".join(op.operands)
    if op.attrs:
        line += " " + format_attrs(op.attrs)
    if op.type is not None:
        line += f" : {op.type}"
    return line


def _params(params) -> str:
    return ", ".join(f"{name}: {type_}" for name, type_ in params)


def _weight(w: Weight) -> str:
    text = f"weight {json.dumps(w.name)} : {w.type}"
    return text + (" " + format_attrs(w.attrs) if w.attrs else "")


def _graph(g: Graph, indent: str) -> list[str]:
    lines = [f"{indent}graph({_params(g.params)}) -> {g.result_type} {{"]
    lines += [f"{indent}  {format_op(op)}" for op in g.ops]
    lines.append(f"{indent}  return {g.result}")
    lines.append(f"{indent}}}")
    return lines


def _model(m: Model, indent: str) -> list[str]:
    attrs = f" attributes {format_attrs(m.attrs)}" if m.attrs else ""
    if m.is_import:
        return [f"{indent}model @{m.name} = import({json.dumps(m.import_path)}){attrs}"]
    lines = [f"{indent}model @{m.name}{attrs} {{"]
    lines += [f"{indent}  {_weight(w)}" for w in m.weights]
    lines += _graph(m.graph, indent + "  ")
    lines.append(f"{indent}}}")
    return lines


def _step(s: Step, indent: str) -> list[str]:
    lines = [f"{indent}step({_params(s.params)}) {{"]
    lines += [f"{indent}  {format_op(op)}" for op in s.ops]
    lines.append(f"{indent}}}")
    return lines


def print_pipeline(p: Pipeline) -> str:
    attrs = f" attributes {format_attrs(p.attrs)}" if p.attrs else ""
    lines = [f"pipeline {p.name}{attrs} {{"]
    for m in p.models:
        lines += _model(m, "  ")
    if p.step is not None:
        lines += _step(p.step, "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"
