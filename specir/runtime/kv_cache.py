"""A preallocated KV cache for one model: per layer k/v [slots, kv_heads, max_seq, head_dim],
the absolute position of every cached row, and the committed length of every slot.

Rows 0 .. lens[s]-1 of slot s are committed; rows from lens[s] on are scratch that forwards
write (drafts, tree nodes) and that `commit_path` / `commit_prefix` promote.
"""
from __future__ import annotations

import torch


class KVCache:
    def __init__(self, layers: dict[int, tuple[int, int]], slots: int, max_seq: int, dtype, device):
        """layers: layer index -> (kv_heads, head_dim). The layers of one shape share one allocation
        each for k and v (`stacks`: [layers, slots, kv_heads, max_seq, head_dim] pairs, in layer
        order), and k[i], v[i] are its views [slots, kv_heads, max_seq, head_dim]: a kernel can then
        move rows of every such layer in one launch."""
        self.max_seq, self.slots = max_seq, slots
        self.k, self.v, self.stacks = {}, {}, []
        for shape in dict.fromkeys(layers.values()):
            ids = [i for i, s in layers.items() if s == shape]
            k, v = (torch.zeros(len(ids), slots, *shape[:1], max_seq, shape[1], dtype=dtype, device=device)
                    for _ in range(2))
            self.stacks.append((k, v))
            for n, i in enumerate(ids):
                self.k[i], self.v[i] = k[n], v[n]
        self.k = {i: self.k[i] for i in layers}  # in the layers' order
        self.v = {i: self.v[i] for i in layers}
        self.pos = torch.zeros(slots, max_seq, dtype=torch.long, device=device)
        self.lens = [0] * slots

    def layer(self, i: int):
        return self.k[i], self.v[i]

    def commit_prefix(self, slot: int, n: int) -> None:
        """Promote the first n scratch rows (already in place)."""
        self.lens[slot] += n

    def commit_path(self, slot: int, rows: list[int]) -> None:
        """Promote scratch rows lens+rows[i] to lens+i (rows ascending): the accepted tree path."""
        base = self.lens[slot]
        if rows != list(range(len(rows))):
            src = torch.tensor([base + r for r in rows], device=self.pos.device)
            dst = torch.arange(base, base + len(rows), device=self.pos.device)
            for cache in (*self.k.values(), *self.v.values()):
                cache[slot, :, dst] = cache[slot, :, src]
            self.pos[slot, dst] = self.pos[slot, src]
        self.lens[slot] = base + len(rows)

    def truncate(self, slot: int, length: int) -> None:
        self.lens[slot] = min(self.lens[slot], length)
