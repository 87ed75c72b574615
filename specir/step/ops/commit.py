"""commit %ctx, %accepted {kv}: the step's last op; the accepted tokens become committed.

Semantics for every active request (a frozen slot changes nothing): the verifier's cache commits
the accepted path's rows (kv = "prefix": they are already in place, as for a chain; kv =
"compact": row lens + path[j] moves to lens + j, as a tree needs; kv = "in-place": the same result,
moving only what is out of place: a request whose accepted path is nodes 0..n-1 (in a tree listed
in creation order: no drafted token accepted, or only node 1) moves no row, and on a backend that
does not capture, a step where no request needs a move launches no copy), its lens grows by the path's
length; the pending token becomes the bonus token; every drafter's feed becomes the emitted
tokens (its next catch-up); `readback` holds the emitted tokens and their number; the random
stream's counter advances. No forwards; width and depth 0.
"""
from __future__ import annotations

import torch

from specir.ir.opdefs import AttrSpec, OpDef, register_op, value
from specir.runtime.recurrent_commit import commit_recurrent
from specir.step.interfaces import StepInterfaces

from .common import no_forwards, zero


def lower(ctx, op, args):
    accepted = args[1]
    state = ctx.state(accepted.model, "verify")
    live = ctx.active != 0
    n = torch.where(live, accepted.n_path, 0).to(torch.int32)
    kv = op.attrs.get("kv", "prefix")
    if kv == "in-place":
        j = torch.arange(accepted.path.shape[1], device=n.device)[None, :]
        moved = ((accepted.path != j) & (j < n[:, None])).any(dim=1)
        n_moved = torch.where(moved, n, 0).to(torch.int32)
        if ctx.backend.captures or bool(moved.any()):  # a capturing backend cannot skip on data
            ctx.backend.commit_path(state, accepted.path, n_moved, True)
    else:
        ctx.backend.commit_path(state, accepted.path, n, kv == "compact")
    last = accepted.path.long().gather(1, (n.long() - 1).clamp(min=0)[:, None])[:, 0]  # recurrent state: the path's last node
    commit_recurrent(state.cache, torch.where(n > 0, last, -1), n, check=not ctx.backend.captures)
    state.lens += n
    last = (accepted.n_emit.long() - 1).clamp(min=0)[:, None]
    bonus = accepted.emitted.gather(1, last)[:, 0]
    ctx.pending.copy_(torch.where(live, bonus, ctx.pending))
    W = ctx.emit_width
    emitted = accepted.emitted[:, :W]
    if emitted.shape[1] < W:
        emitted = torch.nn.functional.pad(emitted, (0, W - emitted.shape[1]))
    n_emit = torch.where(live, accepted.n_emit, 0).to(torch.int32)
    for model in ctx.models.values():
        if model.role == "draft":
            model.feed.copy_(emitted)
            model.n_feed.copy_(n_emit)
    ctx.readback[:, :W] = emitted
    ctx.readback[:, W] = n_emit
    ctx.counter += 1
    return None


register_op(OpDef(
    "commit", "step", (value("ctx", "context"), value("accepted", "accepted")),
    {"kv": AttrSpec("str", "prefix", choices=("prefix", "compact", "in-place"),
                    doc="prefix: accepted tokens are a prefix; compact: move the accepted path; "
                        "in-place: move only the rows out of place")},
    lambda op, ctx: None, pure=False, doc="Append accepted tokens, commit their KV.", role="commit",
    step=StepInterfaces(width=zero, depth=zero, forwards=no_forwards, lower=lower, effects=("commit",))))
