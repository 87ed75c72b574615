"""draft.cascade @mid, %ctx, %draft {extend}: a mid-level verifier judges a draft and extends it.

The middle of a two-level verification (the two-level-verify pass): the drafter proposes (a chain
or a tree), the cheaper verifier @mid keeps the longest prefix it agrees with and continues it with
its own greedy tokens; the result is the chain the declared target verifies (the last judge, so
the pipeline stays lossless whatever @mid is).

Semantics per request (@mid is a draft-role model: it catches up on the tokens emitted last step):
1. catch-up (catch_up.py): @mid commits the emitted tokens; its logits after the pending token
   judge the draft's first tokens;
2. one @mid forward over the draft's tokens (node 0, the pending token, is already in @mid's
   cache): a chain causally at rows lens .. lens + K - 1, positions lens + t; a tree under its
   ancestor mask at rows lens + t - 1, positions lens - 1 + depth[t] (@mid's graph then takes
   mask<tree>);
3. greedy acceptance against @mid's argmax (accept_greedy.accept_path): a = the accepted drafted
   tokens, then @mid's bonus token m_1; for a tree the path's rows are compacted into place
   (backend.commit_path; @mid's lens does not move: those are scratch rows);
4. extend - 1 one-token forwards of m_j at offset a + j - 1 give m_2 .. m_extend (greedy at every
   temperature: the proposal is deterministic, so accept.sample treats it as candidates).
Result (IR type `tokens`, a Draft): d_1 .. d_a, m_1 .. m_extend; count a + extend, width
D + extend (D: the draft's depth), q = None.
Width and depth D + extend. Forwards on @mid per step: one catch-up of the emit width, one of the
draft's width (tree mask for a tree), extend - 1 of one token. Effects: draft (it drafts for the
target; @mid's cache follows the committed tokens like any drafter's) and mid-verify.
Attention-only @mid models (the compaction moves KV rows, not recurrent state). Capture-safe.
"""
from __future__ import annotations

import torch

from specir.ir.opdefs import MAX_DRAFT_TOKENS, AttrSpec, OpDef, TypeRuleError, in_range, register_op, symbol, value
from specir.ir.types import TOKENS
from specir.step.catch_up import catch_up
from specir.step.interfaces import ModelForward, StepInterfaces
from specir.step.values import Draft, Nodes

from .accept_greedy import accept_path
from .common import model_of


EXTEND = 2  # the default of `extend`


def extend_of(op) -> int:
    return int(op.attrs.get("extend", EXTEND))


def _draft_value(op) -> str:
    return op.values[1]


def depth(op, info) -> int:
    return info.depth_of(_draft_value(op)) + extend_of(op)


def _infer(op, ctx):
    extend = extend_of(op)
    if extend < 1 or extend > MAX_DRAFT_TOKENS:
        raise TypeRuleError(f"extend must be between 1 and {MAX_DRAFT_TOKENS}, got {extend}",
                            "extend is how many tokens the mid level adds after its accepted prefix "
                            "(1: only its bonus token)")
    draft_type = ctx.value_type(op.operands[2])
    mask = ctx.model_mask(op.operands[0])
    if draft_type is not None and mask is not None and draft_type.name == "tree" and mask != "tree":
        raise TypeRuleError(f"draft.cascade verifies a tree with {op.operands[0]}, whose graph takes mask<{mask}>",
                            "run tree-verify before two-level-verify (it gives the mid model mask<tree>)")
    return TOKENS


def _forwards(op, info):
    m, W = model_of(op), info.emit_width
    N = info.width_of(_draft_value(op))
    D = info.depth_of(_draft_value(op))
    producer = info.producer.get(_draft_value(op))
    tree = producer is not None and producer.type is not None and producer.type.name == "tree"
    out = [ModelForward(m, W, 1, "catch-up", W),
           ModelForward(m, N, 1, "mid-verify", W + N, mask_width=N if tree else 0)]
    if extend_of(op) > 1:
        out.append(ModelForward(m, 1, extend_of(op) - 1, "draft", W + D + extend_of(op)))
    return out


def _nodes(ctx, draft) -> Nodes:
    return draft if isinstance(draft, Nodes) else Nodes.chain(ctx.pending, draft)


def lower(ctx, op, args):
    state = ctx.state(model_of(op), "draft")
    nodes = _nodes(ctx, args[1])
    E = extend_of(op)
    B, N = nodes.tokens.shape
    D = nodes.max_depth or N - 1
    dev = ctx.device
    first = catch_up(ctx, state)                                                     # [B, V] after pending
    judge = [ctx.backend.argmax(first)[:, None]]
    tree = nodes.mask is not None
    if N > 1:
        T = N - 1
        inputs, forward = ctx.forward(state, ("mid-verify", T, tree), T, mask_width=T if tree else 0)
        inputs.ids.copy_(nodes.tokens[:, 1:])
        inputs.pos.copy_(state.lens.long()[:, None] - 1 + nodes.depths[:, 1:])
        if tree:
            inputs.mask.copy_(nodes.mask[:, 1:, 1:])
        judge.append(ctx.backend.argmax(forward.run()))
    accepted = accept_path(nodes, torch.cat(judge, dim=1), state.name)
    a = (accepted.n_path - 1).long()                                                 # accepted drafted tokens
    if tree:
        rows = (accepted.path[:, 1:].long() - 1).clamp(min=-1).to(torch.int32)
        ctx.backend.commit_path(state, rows, a.to(torch.int32), True)
    width = D + E
    proposal = torch.zeros(B, width, dtype=torch.long, device=dev)
    take = min(D + 1, accepted.emitted.shape[1], width)
    proposal[:, :take] = accepted.emitted[:, :take]                                  # d_1..d_a, m_1, zeros
    for j in range(1, E):
        inputs, forward = ctx.forward(state, ("draft", 1), 1, offsets=True)
        at = (a + j - 1)[:, None]
        inputs.ids.copy_(proposal.gather(1, at))
        inputs.offsets.copy_((a + j - 1).to(torch.int32))
        torch.add(state.lens.long()[:, None], at, out=inputs.pos)
        nxt = ctx.backend.argmax(forward.run()[:, 0])
        proposal.scatter_(1, (a + j)[:, None], nxt[:, None])
    count = (a + E).to(torch.int32)
    return Draft(proposal, count, None)


register_op(OpDef(
    "draft.cascade", "step", (symbol("mid"), value("ctx", "context"), value("draft", "tokens", "tree")),
    {"extend": AttrSpec("int", EXTEND, doc="tokens the mid level adds after its accepted prefix (its bonus token "
                                      "included)", valid=in_range(1))},
    _infer, doc="A mid-level verifier keeps the draft's prefix it agrees with and extends it greedily.",
    role="draft",
    step=StepInterfaces(width=depth, depth=depth, forwards=_forwards, lower=lower,
                        effects=("draft", "mid-verify"))))
