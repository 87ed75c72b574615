"""draft.cascade @mid, %ctx, %draft {extend}: a mid-level verifier judges a draft and extends it.

The middle of a two-level verification (the two-level-verify pass): the drafter proposes (a chain
or a tree), the cheaper verifier @mid keeps the longest prefix it agrees with and continues it with
its own greedy tokens; the result is the chain the declared target verifies (the last judge, so
the pipeline stays lossless whatever @mid is).

Semantics per request (@mid is a draft-role model: it catches up on the tokens emitted last step):
1-2. one @mid forward catches up and judges: its rows are the tokens emitted last step (feed,
   n_feed of them, the pending token last: committed, lens += n_feed), then the draft's nodes
   1 .. N-1 (node 0 is the pending token) at rows lens + j - 1, positions lens - 1 + depth[j]: a
   chain causally, a tree under its ancestor mask (@mid's graph then takes mask<tree>); the
   logits after the pending token and after each node judge the draft;
3. greedy acceptance against @mid's argmax (accept_greedy.accept_path): a = the accepted drafted
   tokens, then @mid's bonus token m_1; for a tree the path's rows are compacted into place
   (backend.commit_path; @mid's lens does not move: those are scratch rows);
4. extend - 1 one-token forwards of m_j at offset a + j - 1 give m_2 .. m_extend (greedy at every
   temperature: the proposal is deterministic, so accept.sample treats it as candidates).
Result (IR type `tokens`, a Draft): d_1 .. d_a, m_1 .. m_extend; count a + extend, width
D + extend (D: the draft's depth), q = None.
Width and depth D + extend. Forwards on @mid per step: one of the emit width + the draft's width
(catch-up and judging fused; a tree mask for a tree), extend - 1 of one token. Effects: draft (it
drafts for the target; @mid's cache follows the committed tokens like any drafter's) and
mid-verify.
Attention-only @mid models (the compaction moves KV rows, not recurrent state). Capture-safe.
"""
from __future__ import annotations

import torch

from specir.ir.opdefs import MAX_DRAFT_TOKENS, AttrSpec, OpDef, TypeRuleError, in_range, register_op, symbol, value
from specir.ir.types import TOKENS
from specir.step.interfaces import ModelForward, StepInterfaces
from specir.step.values import Draft, Nodes

from .accept_greedy import accept_path
from .common import has_recurrent_state, model_of

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
    if has_recurrent_state(ctx.model(op.operands[0])):
        raise TypeRuleError(f"draft.cascade keeps only KV rows of its mid level, but {op.operands[0]} has recurrent "
                            "layers", "use an attention-only (Llama-family) mid level")
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
    F = W + N  # the catch-up rows and the drafted nodes in one forward
    out = [ModelForward(m, F, 1, "mid-verify", F, mask_width=F if tree else 0)]
    if extend_of(op) > 1:
        out.append(ModelForward(m, 1, extend_of(op) - 1, "draft", W + D + extend_of(op)))
    return out


def _nodes(ctx, draft) -> Nodes:
    return draft if isinstance(draft, Nodes) else Nodes.chain(ctx.pending, draft)


def _catch_up_and_judge(ctx, state, nodes: Nodes) -> torch.Tensor:
    """One @mid forward of [feed[:n_feed] | drafted nodes 1..N-1 | padding] (width W + N - 1): the
    catch-up rows causally, each node under its ancestors and every catch-up row; then lens +=
    n_feed. Returns @mid's argmax after each node [B, N] (node 0: the pending token, the last
    catch-up row); node j's row is then lens + j - 1."""
    B, N = nodes.tokens.shape
    W = state.feed.shape[1]
    F, dev = W + N - 1, ctx.device
    tree = nodes.mask is not None
    nf = state.n_feed.long()[:, None]                                                # [B, 1]
    t = torch.arange(F, device=dev)[None, :]
    in_feed = t < nf
    node = (t - nf + 1).clamp(0, N - 1)                                              # node of a draft row
    in_draft = ~in_feed & (t - nf + 1 <= N - 1)
    inputs, forward = ctx.forward(state, ("mid-verify", F, tree), F, mask_width=F if tree else 0)
    fed = state.feed.gather(1, t.clamp(max=W - 1).expand(B, F))
    inputs.ids.copy_(torch.where(in_feed, fed, torch.where(in_draft, nodes.tokens.gather(1, node), 0)))
    depth = nodes.depths.gather(1, node)
    inputs.pos.copy_(state.lens.long()[:, None] + torch.where(in_draft, nf - 1 + depth, t))
    if tree:
        u = t[:, None, :]                                                            # [1, 1, F] key rows
        ancestors = nodes.mask.gather(1, node[:, :, None].expand(B, F, N)).gather(2, node[:, None, :].expand(B, F, F))
        seen = (u < nf[:, :, None]) | (in_draft[:, None, :] & ancestors)
        inputs.mask.copy_(torch.where(in_draft[:, :, None], seen, u <= t[:, :, None]))
    logits = forward.run()
    rows = (nf - 1 + torch.arange(N, device=dev)[None, :]).clamp(0, F - 1)           # [B, N]
    picked = logits.gather(1, rows[:, :, None].expand(B, N, logits.shape[-1]))
    state.lens += state.n_feed
    return ctx.backend.argmax(picked)


def lower(ctx, op, args):
    state = ctx.state(model_of(op), "draft")
    nodes = _nodes(ctx, args[1])
    E = extend_of(op)
    B, N = nodes.tokens.shape
    D = nodes.max_depth or N - 1
    dev = ctx.device
    tree = nodes.mask is not None
    judge = _catch_up_and_judge(ctx, state, nodes)
    accepted = accept_path(nodes, judge, state.name)
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
