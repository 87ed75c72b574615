"""Hypothesis round-trip tests: print(parse(print(x))) == print(x) and parse(print(x)) == x over
generated pipelines (attributes of every kind, model graphs and steps)."""
from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from specir.ir.nodes import Attrs, Graph, Model, Op, Pipeline, Step, Weight
from specir.ir.parser import parse
from specir.ir.printer import print_pipeline
from specir.ir.types import TensorType, Type

names = st.text(string.ascii_lowercase + "_", min_size=1, max_size=8).filter(lambda s: s not in (
    "true", "false", "attributes", "model", "import", "weight", "graph", "return", "step", "pipeline", "nan", "inf"))
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
scalars = st.one_of(st.integers(-10**12, 10**12), floats, st.booleans(), st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(names, inner, max_size=3).map(Attrs)), max_leaves=8)
attrs = st.dictionaries(names, values, max_size=4).map(Attrs)
types = st.one_of(st.sampled_from([Type("context"), Type("tokens"), Type("tree"), Type("logits")]),
                  st.integers(1, 4096).map(lambda n: Type("act", (n,))))


@st.composite
def ops(draw, defined):
    result = draw(st.one_of(st.none(), names.map(lambda n: "%" + n)))
    operands = tuple(draw(st.lists(st.sampled_from(defined), max_size=3))) if defined else ()
    operands += tuple(draw(st.lists(names.map(lambda n: "@" + n), max_size=1)))
    return Op(draw(names.map(lambda n: n + ".op")), operands, draw(attrs), result,
              draw(types) if result else None)


@st.composite
def pipelines(draw):
    weights = tuple(Weight(draw(st.text(min_size=1, max_size=20)), TensorType("bf16", tuple(draw(
        st.lists(st.integers(1, 9999), min_size=1, max_size=3)))), draw(attrs)) for _ in range(draw(st.integers(0, 3))))
    graph_ops = tuple(draw(ops(["%ids", "%pos"])) for _ in range(draw(st.integers(0, 4))))
    graph = Graph((("%ids", Type("ids")), ("%pos", Type("positions")), ("%mask", Type("mask", ("causal",)))),
                  graph_ops, "%ids", Type("logits", (draw(st.integers(1, 10**6)),)))
    models = [Model(draw(names), draw(attrs), weights, graph)]
    if draw(st.booleans()):
        models.append(Model(draw(names) + "_d", draw(attrs), import_path=draw(st.text(max_size=20))))
    if len({m.name for m in models}) < len(models):
        models = models[:1]
    step = Step((("%ctx", Type("context")),), tuple(draw(ops(["%ctx"])) for _ in range(draw(st.integers(0, 4)))))
    return Pipeline(draw(names), draw(attrs), tuple(models), step)


@settings(max_examples=150, deadline=None)
@given(pipelines())
def test_print_parse_print_is_identity(p):
    text = print_pipeline(p)
    again = parse(text)
    assert print_pipeline(again) == text
    assert again == p
    assert hash(again) == hash(p)


def test_structural_equality_ignores_locations():
    a = parse("pipeline p {\n  step(%c: context) {\n    commit %c, %c\n  }\n}\n")
    b = parse("pipeline p {\n\n\n  step(%c: context) {   commit %c, %c }\n}")
    assert a == b and hash(a) == hash(b)
    assert a.step.ops[0].loc.line != b.step.ops[0].loc.line
