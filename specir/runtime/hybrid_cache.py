"""The cache of a model with recurrent layers: its KV cache (attention layers) plus its
recurrent state store, committed together.

`commit_prefix(slot, n)` promotes n scratch rows and commits the recurrent state of node n - 1;
`commit_path(slot, rows)` moves the accepted path's KV rows into place and commits the state of
node rows[-1] (the path's last node: its state already followed the path through its parents);
`truncate` can only keep what is committed (a recurrent state cannot be rolled back to an
earlier length: that is a SpecirError).
The decode step commits through runtime/recurrent_commit.py (batched tensor forms).
"""
from __future__ import annotations

from ..errors import SpecirError
from .kv_cache import KVCache
from .recurrent_state import RecurrentStates


class HybridCache(KVCache):
    def __init__(self, layers, slots: int, max_seq: int, dtype, device, recurrent: RecurrentStates):
        super().__init__(layers, slots, max_seq, dtype, device)
        self.recurrent = recurrent

    def commit_prefix(self, slot: int, n: int) -> None:
        super().commit_prefix(slot, n)
        self.recurrent.commit_one(slot, n - 1, n)

    def commit_path(self, slot: int, rows: list[int]) -> None:
        super().commit_path(slot, rows)
        self.recurrent.commit_one(slot, rows[-1] if rows else -1, len(rows))

    def truncate(self, slot: int, length: int) -> None:
        if length < self.lens[slot]:
            raise SpecirError(f"cannot roll a recurrent model back from {self.lens[slot]} to {length} tokens: "
                              "its state holds no history", hint="recurrent state is committed per accepted "
                              "node; re-prefill the request to start over")
        super().truncate(slot, length)
