"""draft.ngram %ctx {k, max_ngram, min_ngram}: prompt lookup (a host op: it reads the token history).

Semantics per request: for n from min(max_ngram, len - 1) down to min_ngram, find the most recent
earlier occurrence of the last n tokens and propose the (at most k) tokens that followed it; the
first n that matches wins; no match proposes nothing. The result's width is k when any active
request has a proposal, else 0 (the verify then runs over the pending token alone); `count` is
each request's number of proposed tokens. With `off_at = N` > 0 and N or more live requests
(host-known), no lookup runs and the draft is empty (width 0): the verify is a plain autoregressive
step (batch-fusion{shrink=true} sets it where its table drafts nothing; the lookup keeps no state, so
nothing catches up when drafting resumes). Width k, depth k; no model forwards.
"""
from __future__ import annotations

import torch

from specir.acceptance_model import matched
from specir.ir.opdefs import MAX_DRAFT_TOKENS, AttrSpec, OpDef, TypeRuleError, register_op, value
from specir.ir.types import TOKENS
from specir.step.interfaces import StepInterfaces
from specir.step.values import Draft

from .common import DRAFT_K, OFF_AT, check_k, drafting_off, no_forwards


def _infer(op, ctx):
    check_k(op)
    lo, hi = op.attrs.get("min_ngram", 1), op.attrs.get("max_ngram", 3)
    if lo < 1 or hi < lo:
        raise TypeRuleError(f"need 1 <= min_ngram <= max_ngram, got min_ngram = {lo}, max_ngram = {hi}",
                            "the n-gram lengths matched against earlier context, e.g. min_ngram = 1, max_ngram = 3")
    if hi > MAX_DRAFT_TOKENS:
        raise TypeRuleError(f"max_ngram must be at most {MAX_DRAFT_TOKENS}, got {hi}",
                            "the n-gram lengths matched against earlier context, e.g. min_ngram = 1, max_ngram = 3")
    return TOKENS


def lookup(seq: list[int], k: int, max_ngram: int, min_ngram: int) -> list[int]:
    """The proposal for one token history (see the module docstring)."""
    for n in range(min(max_ngram, len(seq) - 1), min_ngram - 1, -1):
        suffix = seq[-n:]
        for start in range(len(seq) - n - 1, -1, -1):
            if seq[start:start + n] == suffix:
                return seq[start + n:start + n + k]
    return []


def accepted(op, profile):
    """The acceptance model's rule: this op's lookup on the profiled history, matched against the
    target's continuation."""
    a = op.attrs
    k, hi, lo = int(a["k"]), int(a.get("max_ngram", 3)), int(a.get("min_ngram", 1))
    return lambda s, i: matched(lookup(s.prompt + s.continuation[:i], k, hi, lo), s, i)


def lower(ctx, op, args):
    a = op.attrs
    k = a["k"]
    if drafting_off(ctx, op):
        return Draft(torch.zeros(ctx.B, 0, dtype=torch.long, device=ctx.device),
                     torch.zeros(ctx.B, dtype=torch.int32, device=ctx.device))
    proposals = [lookup(r.tokens, k, a.get("max_ngram", 3), a.get("min_ngram", 1)) if r is not None and not r.done
                 else [] for r in ctx.requests]
    proposals += [[]] * (ctx.B - len(proposals))
    width = k if any(proposals) else 0
    tokens = torch.zeros(ctx.B, width, dtype=torch.long)
    for b, p in enumerate(proposals):
        if p and width:
            tokens[b, :len(p)] = torch.tensor(p, dtype=torch.long)
    count = torch.tensor([len(p) for p in proposals], dtype=torch.int32)
    return Draft(tokens.to(ctx.device), count.to(ctx.device))


register_op(OpDef(
    "draft.ngram", "step", (value("ctx", "context"),),
    {"k": DRAFT_K, "max_ngram": AttrSpec("int", 3), "min_ngram": AttrSpec("int", 1), "off_at": OFF_AT}, _infer,
    doc="Prompt lookup: continue the longest earlier match of the last n tokens.", role="draft",
    step=StepInterfaces(width=lambda op, info: op.attrs["k"], depth=lambda op, info: op.attrs["k"],
                        forwards=no_forwards, lower=lower, effects=("draft", "host"), needs_host=True,
                        overhead_s=20e-6, accepted=accepted)))
