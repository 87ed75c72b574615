"""Pieces the step op definitions share: the draft-size attribute and the drafter-model checks."""
from __future__ import annotations

from specir.ir.opdefs import MAX_DRAFT_TOKENS, OPS, AttrSpec, TypeRuleError

DRAFT_K = AttrSpec("int", doc="number of drafted tokens per step")


def check_k(op) -> None:
    if op.attrs["k"] < 1:
        raise TypeRuleError(f"k must be at least 1, got {op.attrs['k']}",
                            "k is the number of drafted tokens per step (for plain decoding, drop the draft op)")
    if op.attrs["k"] > MAX_DRAFT_TOKENS:
        raise TypeRuleError(f"k must be at most {MAX_DRAFT_TOKENS}, got {op.attrs['k']}",
                            "k is the number of drafted tokens per step; a few (2-16) pay off")


def model_vocab(ctx, symbol_name: str) -> int | None:
    """The vocabulary of the model a step op runs (None before its import is expanded)."""
    model = ctx.model(symbol_name)
    return model.graph.result_type.width if model is not None and model.graph is not None else None


def model_of(op) -> str:
    """The op's model operand, without '@'."""
    return op.symbols[0][1:]


def no_forwards(op, info) -> list:
    return []


def zero(op, info) -> int:
    return 0


OFF_AT = AttrSpec("int", 0, doc="draft nothing (the drafter idles) once this many requests are live; 0: never")


def off_at_live(op, live: int) -> bool:
    """The op's `off_at` rule: True when it drafts nothing with `live` requests decoding."""
    off_at = op.attrs.get("off_at", 0)
    return bool(off_at) and live >= off_at


def drafting_off(ctx, op) -> bool:
    """The op's `off_at` rule this step (host-known): True when it drafts nothing."""
    return off_at_live(op, ctx.live_requests())


def mark_behind(ctx, op) -> None:
    """The op's drafter missed tokens (a step with drafting off, or a prefill that skipped it): the
    next step it drafts resyncs it (off_variant)."""
    ctx.op_state[("behind", id(op))] = True


def off_variant(ctx, op):
    """A draft op's mode this step, evaluated once per step by the program: "on"; "off" (no drafter
    forward; the drafter falls behind); ("resync", n) on the first step back on (the drafter catches
    up on what it skipped: unique per resync, so never replayed from a capture)."""
    behind = ("behind", id(op))
    if drafting_off(ctx, op):
        mark_behind(ctx, op)
        return "off"
    if ctx.op_state.get(behind):
        ctx.op_state[behind] = False
        count = ctx.op_state[("resyncs", id(op))] = ctx.op_state.get(("resyncs", id(op)), 0) + 1
        return ("resync", count)
    return "on"


def draft_mode(ctx, op):
    return ctx.variants.get(id(op), "on")


def has_recurrent_state(model) -> bool:
    """Whether a model region's graph holds per-request recurrent state (ops whose definition
    declares `states`: conv, SSM, delta rule)."""
    if model is None or model.graph is None:
        return False
    return any(getattr(OPS.get(op.name), "states", None) and OPS[op.name].states(op.attrs) for op in model.graph.ops)
