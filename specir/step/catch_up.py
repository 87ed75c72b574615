"""A drafter catching up: it feeds the tokens emitted last step (the pending one included).

`catch_up(ctx, state) -> logits [B, V]`: one forward of `feed` (width W) at rows lens .. lens + W - 1
and positions lens + t, then lens += n_feed: the drafter's cache then holds every committed token
and the pending one; the logits are those after the pending token (row n_feed - 1). A frozen
slot (n_feed = 0) commits nothing. Capture-safe. A backend that does not capture runs only the
first max(n_feed) rows (the rest is padding that no real row attends to: same logits, fewer rows).

`resync(ctx, state) -> logits [B, V]`: the same, for a drafter that skipped steps (drafting was off):
it feeds each live request's tokens from its committed drafter rows to the pending token, read
from the host's token history (`ctx.requests`; one host read of `lens`). Not capture-safe: the
program runs it only in a step whose variant is unique (never replayed).
"""
from __future__ import annotations

import torch

from ..runtime.recurrent_commit import commit_recurrent


def catch_up(ctx, state) -> torch.Tensor:
    W = state.feed.shape[1]
    if not ctx.backend.captures:
        W = max(1, int(state.n_feed.max()))
    return _feed(ctx, state, state.feed[:, :W], state.n_feed)


def resync(ctx, state) -> torch.Tensor:
    lens = state.lens.tolist()
    feeds = [list(r.tokens[lens[b]:]) if r is not None and not r.done else [] for b, r in enumerate(ctx.requests)]
    feeds += [[]] * (ctx.B - len(feeds))
    W = max(1, max(len(f) for f in feeds))
    ids = torch.zeros(ctx.B, W, dtype=torch.long)
    for b, f in enumerate(feeds):
        ids[b, :len(f)] = torch.tensor(f, dtype=torch.long)
    n = torch.tensor([len(f) for f in feeds], dtype=torch.int32)
    return _feed(ctx, state, ids.to(ctx.device), n.to(ctx.device))


def _feed(ctx, state, feed: torch.Tensor, n_feed: torch.Tensor) -> torch.Tensor:
    W = feed.shape[1]
    inputs, forward = ctx.forward(state, ("catch-up", W), W)
    inputs.ids.copy_(feed)
    torch.add(state.lens.long()[:, None], torch.arange(W, device=ctx.device)[None, :], out=inputs.pos)
    logits = forward.run()
    row = (n_feed.long() - 1).clamp(min=0)
    last = logits.gather(1, row[:, None, None].expand(-1, 1, logits.shape[-1]))[:, 0]
    commit_recurrent(state.cache, n_feed.long() - 1, n_feed, check=not ctx.backend.captures)
    state.lens += n_feed
    return last
