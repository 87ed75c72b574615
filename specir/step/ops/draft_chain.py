"""draft.chain @drafter, %ctx {k}: k tokens per request from a draft model.

Semantics: the drafter catches up (catch_up.py), then proposes token 1 from its logits after the
pending token and tokens 2..k from k - 1 one-token forwards at scratch rows lens + i - 1 (greedy at
temperature 0; in sampling mode a request at temperature T > 0 draws from q = softmax(logits / T)
and q is kept for lossless acceptance). The draft's score is each prefix's cumulative log-probability
under the drafter (its confidence, read by batch.budget). With `off_at = N` > 0 and N or more live
requests (host-known), no drafter forward runs and the draft is empty (count 0): the verify is a
plain autoregressive step; the first step back on, the drafter catches up on the tokens it skipped
(catch_up.resync).
Width k, depth k. Forwards on @drafter per step: one catch-up of the emit width, k - 1 of one token.
"""
from __future__ import annotations

import torch

from specir.acceptance_model import run_length
from specir.ir.opdefs import OpDef, register_op, symbol, value
from specir.ir.types import TOKENS
from specir.step.catch_up import catch_up, resync
from specir.step.interfaces import ModelForward, StepInterfaces
from specir.step.values import Draft

from .common import DRAFT_K, OFF_AT, check_k, draft_mode, model_of, off_variant

STREAM = 101


def _infer(op, ctx):
    check_k(op)
    return TOKENS


def _forwards(op, info):
    d, k, W = model_of(op), op.attrs["k"], info.emit_width
    out = [ModelForward(d, W, 1, "catch-up", W, ranked=1)]  # each proposal's log-probability: StepBackend.log_prob_of
    if k > 1:
        out.append(ModelForward(d, 1, k - 1, "draft", W + k, ranked=1))
    return out


def accepted(op, profile):
    """The acceptance model's rule: a greedy chain accepts the drafter's run of rank-0 tokens (at most k)."""
    k = int(op.attrs["k"])
    return lambda s, i: run_length(s.ranks, i, k)


def lower(ctx, op, args):
    state = ctx.state(model_of(op), "draft")
    k = op.attrs["k"]
    mode = draft_mode(ctx, op)
    if mode == "off":  # width 0 (as draft.ngram's): the verify and acceptance then work on one row, as AR's do
        z = torch.zeros(ctx.B, 0, dtype=torch.long, device=ctx.device)  # q None: nothing was sampled
        return Draft(z, torch.zeros(ctx.B, dtype=torch.int32, device=ctx.device), None,
                     torch.zeros(ctx.B, 0, device=ctx.device))
    logits = catch_up(ctx, state) if mode == "on" else resync(ctx, state)
    tokens, qs, scores = [], [], []
    total = torch.zeros(ctx.B, dtype=torch.float32, device=ctx.device)
    for i in range(k):
        token, q = ctx.choose(logits, STREAM + i)
        tokens.append(token)
        qs.append(q)
        total = total + ctx.backend.log_prob_of(logits, token)
        scores.append(total)
        if i + 1 < k:
            inputs, forward = ctx.forward(state, ("draft", 1), 1, offsets=True)
            inputs.ids[:, 0] = token
            inputs.offsets.fill_(i)
            torch.add(state.lens.long()[:, None], i, out=inputs.pos)
            logits = forward.run()[:, 0]
    count = torch.full((ctx.B,), k, dtype=torch.int32, device=ctx.device)
    q = torch.stack(qs, dim=1) if ctx.sampling else None
    return Draft(torch.stack(tokens, dim=1), count, q, torch.stack(scores, dim=1))


register_op(OpDef(
    "draft.chain", "step", (symbol("drafter"), value("ctx", "context")), {"k": DRAFT_K, "off_at": OFF_AT}, _infer,
    doc="k greedy tokens from a draft model.", role="draft",
    step=StepInterfaces(width=lambda op, info: op.attrs["k"], depth=lambda op, info: op.attrs["k"],
                        forwards=_forwards, lower=lower, effects=("draft",), variant=off_variant,
                        backend_calls=("log_prob_of",),
                        accepted=accepted)))
