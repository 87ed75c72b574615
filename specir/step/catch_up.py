"""A drafter catching up: it feeds the tokens emitted last step (the pending one included).

`catch_up(ctx, state) -> logits [B, V]`: one forward of `feed` (width W) at rows lens .. lens + W - 1
and positions lens + t, then lens += n_feed: the drafter's cache then holds every committed token
and the pending one; the logits are those after the pending token (row n_feed - 1). A frozen
slot (n_feed = 0) commits nothing. Capture-safe. A backend that does not capture runs only the
first max(n_feed) rows (the rest is padding that no real row attends to: same logits, fewer rows).
"""
from __future__ import annotations

import torch

from ..runtime.recurrent_commit import commit_recurrent


def catch_up(ctx, state) -> torch.Tensor:
    W = state.feed.shape[1]
    if not ctx.backend.captures:
        W = max(1, int(state.n_feed.max()))
    inputs, forward = ctx.forward(state, ("catch-up", W), W)
    inputs.ids.copy_(state.feed[:, :W])
    torch.add(state.lens.long()[:, None], torch.arange(W, device=ctx.device)[None, :], out=inputs.pos)
    logits = forward.run()
    row = (state.n_feed.long() - 1).clamp(min=0)
    last = logits.gather(1, row[:, None, None].expand(-1, 1, logits.shape[-1]))[:, 0]
    commit_recurrent(state.cache, state.n_feed.long() - 1, state.n_feed, check=not ctx.backend.captures)
    state.lens += state.n_feed
    return last
