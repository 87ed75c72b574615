"""The decode step's hooks into recurrent state: wherever it advances a model's committed lengths
it calls `commit_recurrent(cache, nodes, advance)` (and `reset_recurrent(cache, slots)` for slots
that start new requests). Batched tensor operations, device-resident; for a cache without
recurrent state (a plain KVCache) they do nothing. Imports nothing of the IR (the step ops import
this while the op table is being built)."""
from __future__ import annotations

import torch


def commit_recurrent(cache, nodes: torch.Tensor, advance: torch.Tensor, slots: torch.Tensor | None = None, *,
                     check: bool = True) -> None:
    """Commit the state after node nodes[b] (-1: none) for request b's slot (slots[b], default b),
    shifting its scratch ring by advance[b] (the rows its KV cache commits)."""
    states = getattr(cache, "recurrent", None)
    if states is None:
        return
    slots = torch.arange(nodes.shape[0], device=nodes.device) if slots is None else slots
    states.commit(slots, nodes.long(), advance.long(), check=check)


def reset_recurrent(cache, slots: torch.Tensor) -> None:
    """Zero the recurrent state of `slots` (new requests); nothing for a cache without it."""
    states = getattr(cache, "recurrent", None)
    if states is not None:
        states.reset(slots)

