"""Pieces the step op definitions share: the draft-size attribute and the drafter-model checks."""
from __future__ import annotations

from specir.ir.opdefs import AttrSpec, TypeRuleError

DRAFT_K = AttrSpec("int", doc="number of drafted tokens per step")


def check_k(op) -> None:
    if op.attrs["k"] < 1:
        raise TypeRuleError(f"k must be at least 1, got {op.attrs['k']}",
                            "k is the number of drafted tokens per step (for plain decoding, drop the draft op)")


def model_of(op) -> str:
    """The op's model operand, without '@'."""
    return op.symbols[0][1:]


def no_forwards(op, info) -> list:
    return []


def zero(op, info) -> int:
    return 0
