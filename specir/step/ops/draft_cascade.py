"""draft.cascade @mid, %ctx, %draft {extend}: a mid-level verifier judges a draft and extends it.

The middle of a two-level verification (the two-level-verify pass): the drafter proposes (a chain
or a tree), the cheaper verifier @mid keeps the longest prefix it agrees with and continues it with
its own greedy tokens; the result is the chain the declared target verifies (the last judge, so
the pipeline stays lossless whatever @mid is).

Semantics per request (@mid is a draft-role model: it catches up on the tokens emitted last step).
Rows are numbered from @mid's committed length at the step's start; row r is scratch node r of
@mid's cache (KV row lens + r and, for a recurrent @mid, recurrent node r: both follow the same
rows, so a node's state derives from the nearest earlier row its mask shows):
1-2. one @mid forward catches up and judges (width F = W + N - 1): rows 0 .. n_feed - 1 are the
   tokens emitted last step (feed, the pending token last), rows n_feed - 1 + j the draft's nodes
   j = 1 .. N-1 (node 0 is the pending token) at positions lens - 1 + n_feed + depth[j]: a chain
   causally, a tree under its ancestor mask (@mid's graph then takes mask<tree>); the logits after
   the pending token and after each node judge the draft;
3. greedy acceptance against @mid's argmax (accept_greedy.accept_path): a = the accepted drafted
   tokens, then @mid's bonus token m_1;
4. extend - 1 one-token forwards of m_j give m_2 .. m_extend (greedy at every temperature: the
   proposal is deterministic, so accept.sample treats it as candidates), at position
   lens + n_feed + a + j - 1: after a chain at row n_feed + a + j - 1 (causally: the feed, the
   accepted prefix and m_1 .. m_j-1), after a tree at row F + j - 1 under a mask showing the feed, the
   accepted path's rows and m_1 .. m_j-1 (no row moves, so a recurrent state derives from the
   path's last node);
5. the feed is committed: lens += n_feed, and a recurrent @mid commits the pending token's node
   (n_feed - 1); every other row stays scratch.
Result (IR type `tokens`, a Draft): d_1 .. d_a, m_1 .. m_extend; count a + extend, width
D + extend (D: the draft's depth), q = None.
Width and depth D + extend. Forwards on @mid per step: one of the emit width + the draft's width
(catch-up and judging fused; a tree mask for a tree), extend - 1 of one token. Effects: draft (it
drafts for the target; @mid's cache follows the committed tokens like any drafter's) and
mid-verify. Any @mid model, attention-only or with recurrent layers. Capture-safe.
"""
from __future__ import annotations

import torch

from specir.ir.opdefs import MAX_DRAFT_TOKENS, AttrSpec, OpDef, TypeRuleError, in_range, register_op, symbol, value
from specir.ir.types import TOKENS
from specir.runtime.recurrent_commit import commit_recurrent
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
    F = W + N  # the catch-up rows and the drafted nodes in one forward
    E = extend_of(op)
    out = [ModelForward(m, F, 1, "mid-verify", F, mask_width=F if tree else 0)]
    if E > 1:  # a tree's extension rows follow the judging forward's; a chain's its accepted prefix
        U = F + E - 1
        out.append(ModelForward(m, 1, E - 1, "draft", U if tree else W + D + E, mask_width=U if tree else 0))
    return out


def _nodes(ctx, draft) -> Nodes:
    return draft if isinstance(draft, Nodes) else Nodes.chain(ctx.pending, draft)


def _catch_up_and_judge(ctx, state, nodes: Nodes) -> tuple[torch.Tensor, int]:
    """One @mid forward of [feed[:n_feed] | drafted nodes 1..N-1 | padding] (width W + N - 1): the
    catch-up rows causally, each node under its ancestors and every catch-up row (node j at row
    n_feed - 1 + j). Returns @mid's argmax after each node [B, N] (node 0: the pending token, the
    last catch-up row) and the forward's width. Commits nothing (step 5 of the module docstring does)."""
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
    return ctx.backend.argmax(picked), F


def _extension_mask(accepted, nf: torch.Tensor, U: int) -> torch.Tensor:
    """[B, U] rows an extension after a tree sees: the feed (rows < n_feed) and the accepted path's
    nodes (node p at row n_feed - 1 + p); lower() adds the extension rows."""
    u = torch.arange(U, device=nf.device)
    P = accepted.path.shape[1]
    on_path = torch.arange(P, device=nf.device)[None, :] < accepted.n_path.long()[:, None]     # [B, P]
    rows = nf[:, None] - 1 + accepted.path.long()                                               # [B, P]
    path_rows = ((rows[:, :, None] == u) & on_path[:, :, None]).any(1)
    return (u[None, :] < nf[:, None]) | path_rows


def lower(ctx, op, args):
    state = ctx.state(model_of(op), "draft")
    nodes = _nodes(ctx, args[1])
    E = extend_of(op)
    B, N = nodes.tokens.shape
    D = nodes.max_depth or N - 1
    dev = ctx.device
    tree = nodes.mask is not None
    judge, F = _catch_up_and_judge(ctx, state, nodes)
    accepted = accept_path(nodes, judge, state.name)
    a = (accepted.n_path - 1).long()                                                 # accepted drafted tokens
    nf = state.n_feed.long()
    width = D + E
    proposal = torch.zeros(B, width, dtype=torch.long, device=dev)
    take = min(D + 1, accepted.emitted.shape[1], width)
    proposal[:, :take] = accepted.emitted[:, :take]                                  # d_1..d_a, m_1, zeros
    U = F + E - 1                                                                    # F: the judging forward's rows
    seen = _extension_mask(accepted, nf, U) if tree and E > 1 else None
    for j in range(1, E):
        at = (a + j - 1)[:, None]                                                    # m_j's index in the proposal
        after = nf[:, None] + at                                                     # m_j's place after the feed
        if tree:
            inputs, forward = ctx.forward(state, ("cascade-extend", U), 1, mask_width=U, offsets=True)
            inputs.offsets.fill_(F + j - 1)
            seen[:, F + j - 1] = True
            inputs.mask.copy_(seen[:, None, :])
        else:
            inputs, forward = ctx.forward(state, ("draft", 1), 1, offsets=True)
            inputs.offsets.copy_(after[:, 0].to(torch.int32))
        inputs.ids.copy_(proposal.gather(1, at))
        torch.add(state.lens.long()[:, None], after, out=inputs.pos)
        nxt = ctx.backend.argmax(forward.run()[:, 0])
        proposal.scatter_(1, (a + j)[:, None], nxt[:, None])
    commit_recurrent(state.cache, nf - 1, nf, check=not ctx.backend.captures)       # the pending token's node
    state.lens += state.n_feed
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
