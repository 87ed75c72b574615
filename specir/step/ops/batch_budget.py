"""batch.budget %ctx, %draft {tokens, split}: one budget of drafted tokens per step, shared by the batch.

Semantics: with b live requests, the step verifies at most tokens[min(b, len(tokens)) - 1] drafted
tokens in all (plus each live request's pending token); the result is the draft with the nodes
past the budget made invalid (a chain: a shorter count), so a packed verify (verify.packed) runs
over just the kept ones. `split = "confidence"`: the kept nodes are the best of the whole batch by
draft score (cumulative draft log-probability: confident requests draft deeper, unsure ones
shallower), ties to the lower request slot and node; `split = "equal"` (and any draft without
scores, e.g. n-gram): each live request keeps its first budget // b nodes, the first budget % b
live requests one more. A child never scores above its parent and a parent precedes its children,
so the kept nodes of a request are ancestor-closed (a chain keeps a prefix). A budget of 0 drafted
tokens makes the verify a plain autoregressive step. Lossless: acceptance only ever accepts
verified nodes. Capture-safe (no host read). Width and depth: those of the draft (at most).
"""
from __future__ import annotations

import torch

from specir.ir.opdefs import AttrSpec, OpDef, TypeRuleError, register_op, value
from specir.step.interfaces import StepInterfaces
from specir.step.values import Draft, Nodes

from .common import no_forwards


def _infer(op, ctx):
    tokens = op.attrs["tokens"]
    if not tokens or any(not isinstance(t, int) or isinstance(t, bool) or t < 0 for t in tokens):
        raise TypeRuleError(f"tokens must be a non-empty list of integers >= 0 (drafted tokens per step by live "
                            f"batch size), got {list(tokens)}", "e.g. {tokens = [8, 12, 12, 0]}")
    return ctx.value_type(op.values[1])


def _draft_width(op, info) -> int:
    return info.width_of(op.values[1])


def _draft_depth(op, info) -> int:
    return info.depth_of(op.values[1])


def setup(ctx, op) -> None:
    ctx.op_state[id(op)] = torch.tensor(op.attrs["tokens"], dtype=torch.long, device=ctx.device)


def budget_now(table: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    """The drafted-token budget (0-dim) for the number of live requests."""
    b = live.sum().clamp(1, table.shape[0])
    return table.index_select(0, (b - 1).reshape(1)).reshape(())  # no host read (capturable)


def keep(score: torch.Tensor | None, valid: torch.Tensor, live: torch.Tensor, budget: torch.Tensor,
         split: str) -> torch.Tensor:
    """[B, M] drafted nodes kept (see the module docstring); valid/score over drafted nodes only."""
    B, M = valid.shape
    ok = valid & live[:, None]
    if split == "confidence" and score is not None:
        s = torch.where(ok, score.float(), -torch.inf).reshape(-1)
        order = torch.sort(s, descending=True, stable=True).indices
        rank = torch.empty_like(order)
        rank[order] = torch.arange(B * M, device=valid.device)
        return ok & (rank.reshape(B, M) < budget)
    n_live = live.sum().clamp(min=1)
    per, extra = budget // n_live, budget % n_live
    live_rank = live.long().cumsum(0) - 1
    mine = per + (live_rank < extra).long()
    within = ok.long().cumsum(dim=1) - 1
    return ok & (within < mine[:, None])


def _drafted_most(op, info, live: int) -> int:
    tokens = op.attrs["tokens"]
    return min(tokens[min(max(live, 1), len(tokens)) - 1], info.drafted_most_of(op.values[1], live))


def _emission(op, info, alpha, order):
    """The draft's curve in the order this op keeps nodes: by confidence, or the first ones of each
    request as listed (`split = "equal"`); "listed" when this op or a budget after it keeps listed nodes."""
    mine = "listed" if op.attrs.get("split", "confidence") == "equal" else "confidence"
    return info.emission_of(op.values[1], alpha, "listed" if "listed" in (mine, order) else "confidence")


def lower(ctx, op, args):
    draft = args[1]
    table = ctx.op_state[id(op)]
    live = ctx.active != 0
    budget = budget_now(table, live)
    split = op.attrs.get("split", "confidence")
    if isinstance(draft, Nodes):
        kept = keep(None if draft.score is None else draft.score[:, 1:], draft.valid[:, 1:], live, budget, split)
        valid = torch.cat([draft.valid[:, :1], kept], dim=1)
        return Nodes(draft.tokens, draft.parents, draft.depths, valid, draft.mask, draft.q, draft.max_depth,
                     draft.max_children, draft.score)
    K = draft.tokens.shape[1]
    valid = torch.arange(K, device=ctx.device)[None, :] < draft.count[:, None]
    kept = keep(draft.score, valid, live, budget, split)
    return Draft(draft.tokens, kept.sum(dim=1).to(torch.int32), draft.q, draft.score)


register_op(OpDef(
    "batch.budget", "step", (value("ctx", "context"), value("draft", "tokens", "tree")),
    {"tokens": AttrSpec("list", doc="drafted tokens per step, by live batch size (the last entry for larger batches)"),
     "split": AttrSpec("str", "confidence", choices=("confidence", "equal"),
                       doc="confidence: the batch's best nodes by draft score; equal: the same share each")},
    _infer, doc="One drafted-token budget per step, split across the batch by draft confidence.",
    step=StepInterfaces(width=_draft_width, depth=_draft_depth, forwards=no_forwards, lower=lower, setup=setup,
                        effects=("budget",), emission=_emission,
                        drafted_most=_drafted_most)))
