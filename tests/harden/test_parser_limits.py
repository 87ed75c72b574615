"""The parser on hostile .spec files: deep nesting, binary bytes, non-ASCII names, huge files and
huge strings. Each gives one located message (or parses in linear time and memory)."""
from __future__ import annotations

import time
import tracemalloc

import pytest

from specir.ir import parser
from tests.harden.conftest import assert_error


def _ops(n: int) -> str:
    body = "\n".join(f"    %v{i} = draft.ngram %ctx {{k = 3}}" for i in range(n))
    return f"pipeline p {{\n  step(%ctx: context) {{\n{body}\n    commit %ctx, %v0\n  }}\n}}\n"


def test_deeply_nested_attributes_are_a_located_error(tmp_path, specir_cli):
    p = tmp_path / "nest.spec"
    p.write_text("pipeline p attributes {x = " + "{a = " * 300 + "1" + "}" * 300 + "} {\n}\n")
    assert_error(specir_cli("opt", p), "attribute values are nested more than 32 deep", f"{p}:1:",
                 hint="at most 32 levels")
    lists = tmp_path / "lists.spec"
    lists.write_text("pipeline p attributes {x = " + "[" * 300 + "]" * 300 + "} {\n}\n")
    assert_error(specir_cli("opt", lists), "nested more than 32 deep", f"{lists}:1:")
    ok = tmp_path / "ok.spec"
    ok.write_text("pipeline p attributes {x = " + "{a = " * 31 + "1" + "}" * 31 + "} {\n}\n")
    assert specir_cli("opt", ok)[0] == 0


@pytest.mark.parametrize("data, message, where", [
    (b"pipeline p {\n  \x00\x01\x02}\n", "is a binary file, not a .spec text (a NUL byte at line 2, column 3, offset 15)",
     ":2:3"),
    (b"pipeline p {\n  \xff\xfe}\n", "is not UTF-8 text: byte 0xff at line 2, column 3 (offset 15)", ":2:3"),
])
def test_binary_spec_names_the_first_bad_byte(tmp_path, specir_cli, data, message, where):
    p = tmp_path / "bin.spec"
    p.write_bytes(data)
    assert_error(specir_cli("opt", p), message, f"{p}{where}", hint=".spec text file")


@pytest.mark.parametrize("text, char, col", [
    ("pipeline p {\n  step(%ctx: context) {\n    %réponse = draft.ngram %ctx {k = 3}\n  }\n}\n", "é", "3:7"),
    ('pipeline p {\n  model @modèle = import("x")\n}\n', "è", "2:13"),
    ("pipeline é {\n}\n", "é", "1:10"),
])
def test_non_ascii_identifiers_say_identifiers_are_ascii(tmp_path, specir_cli, text, char, col):
    p = tmp_path / "u.spec"
    p.write_text(text)
    assert_error(specir_cli("opt", p), f"{char!r} cannot appear in a name: identifiers are ASCII", f"{p}:{col}",
                 char, hint="strings may hold any text")


def test_locations_cost_no_scan_of_the_file(monkeypatch):
    """Every node's location comes from a line table built once (was: splitlines per node)."""
    calls = []
    real = parser.location_in
    monkeypatch.setattr(parser, "location_in", lambda *a: calls.append(a) or real(*a))
    pipeline = parser.parse(_ops(500), "big.spec")
    assert not calls
    op = pipeline.step.ops[250]
    assert (op.loc.line, op.loc.column, op.loc.source_line) == (253, 5, "    %v250 = draft.ngram %ctx {k = 3}")


def test_parse_time_grows_linearly():
    """1k vs 10k ops: linear is 10x; the quadratic parser was ~40x. Generous slack, best of a few."""
    small, large = _ops(1_000), _ops(10_000)
    parser.parse(_ops(10))  # grammar built

    def best(text, runs):
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            parser.parse(text)
            times.append(time.perf_counter() - start)
        return min(times)
    ratio = best(large, 2) / best(small, 5)
    assert ratio < 25, f"10k ops took {ratio:.1f}x the time of 1k ops"


def test_a_long_string_attribute_parses_in_linear_memory():
    text = 'pipeline p attributes {s = "' + "x" * 2_000_000 + '"} {\n}\n'
    tracemalloc.start()
    try:
        pipeline = parser.parse(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(pipeline.attrs["s"]) == 2_000_000
    assert peak < 20 * len(text), f"peak {peak / 1e6:.0f} MB for a {len(text) / 1e6:.0f} MB text"


def test_a_spec_past_the_size_cap_is_refused(monkeypatch, tmp_path, specir_cli):
    monkeypatch.setattr(parser, "MAX_TEXT_CHARS", 1000)
    p = tmp_path / "huge.spec"
    p.write_text(_ops(100))
    assert_error(specir_cli("opt", p), "specir reads pipelines of up to 1000 characters", str(p), hint="split it")
