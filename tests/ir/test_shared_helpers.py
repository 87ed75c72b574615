"""The IR helpers passes and the core share (one place each): a model's mask kind and a model with
another mask (Model.mask_kind / Model.with_mask), and a step op's declared role (opdefs.role_of)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from specir.ir.nodes import Model, Op
from specir.ir.opdefs import role_of
from specir.ir.parser import parse
from specir.ir.printer import print_pipeline

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "tree-verify" / "chain_to_tree.spec"


def _pipeline():
    return parse(GOLDEN.read_text().split("// ----- expected -----")[0], str(GOLDEN))


def test_mask_kind_and_with_mask():
    p = _pipeline()
    target = p.model("target")
    assert target.mask_kind == "causal"
    tree = target.with_mask("tree")
    assert tree.mask_kind == "tree" and tree.graph.ops == target.graph.ops
    assert tree.with_mask("causal") == target  # the same model back: nothing else changes
    assert "%mask: mask<tree>" in print_pipeline(replace(p, models=(tree,) + p.models[1:]))
    unexpanded = Model("m", import_path="x")
    assert unexpanded.mask_kind is None and unexpanded.with_mask("tree") is unexpanded


def test_role_of_reads_the_op_definition():
    import specir.step.ops  # noqa: F401  (registers the step ops)
    assert [role_of(op) for op in _pipeline().step.ops] == ["draft", "verify", "accept", "commit"]
    assert role_of(Op("no.such_op", ())) == ""
