"""Recurrent ops inside a packed forward (verify.packed over a hybrid target: batch-fusion).

A packed forward runs R requests' verified nodes as one-token rows (specir/step/ragged.py): row i
is request slots[i]'s node offsets[i], its tree-mask row mask[i, 0, :N]; rows >= row_start[R] are
pad rows repeating row 0. A recurrent op needs each request's nodes together (a node's state
derives from its parent's), so around it the rows go back to the per-request layout [R, N] that
verify.tree uses (`pad_into`: node n of request r at [r, n]; the nodes a budget dropped are zero inputs
whose states nobody commits), the op runs over that layout with a RecurrentForward whose token n
of request r is node n (offsets 0; parents from the padded tree mask, the unverified nodes
seeing only themselves), and its output comes back to the rows (`unpad`). Scratch nodes and
commits therefore number nodes as the KV cache does (row lens + node), so the commit of the
accepted path is the tree's. Every step is a device tensor operation (capture-safe).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .recurrent_state import RecurrentForward, RecurrentStates, tree_parents


@dataclass
class PackedRows:
    requests: int
    width: int
    slot: torch.Tensor  # [rows] int64: request (cache slot) of each row
    node: torch.Tensor  # [rows] int64: node of each row in its request's tree
    flat: torch.Tensor  # [rows] int64: slot * N + node, or R * N (a dump entry) for a pad row
    mask: torch.Tensor  # [R, N, N] bool: each request's tree mask (unverified nodes see only themselves)

    @classmethod
    def of(cls, slots: torch.Tensor, offsets: torch.Tensor, mask: torch.Tensor, row_start: torch.Tensor) -> "PackedRows":
        """From a packed forward's inputs: slots/offsets [rows], mask [rows, 1, >= N], row_start [R + 1]
        (rows from row_start[R] on are pad rows: they write nothing, whatever they computed)."""
        R, N, rows = row_start.shape[0] - 1, mask.shape[-1], slots.shape[0]
        slot, node = slots.long(), offsets.long()
        real = torch.arange(rows, device=slot.device) < row_start[-1].long()
        flat = torch.where(real, slot * N + node, R * N)
        padded = torch.eye(N, dtype=torch.bool, device=mask.device).expand(R + 1, N, N).reshape(-1, N).clone()
        padded[flat] = mask[:, 0, :N].bool()
        return cls(R, N, slot, node, flat, padded[: R * N].view(R, N, N))

    def parents(self) -> torch.Tensor:
        """[R, N]: each node's parent in its request's tree (-1: the committed state)."""
        return tree_parents(self.mask, torch.zeros(self.requests, dtype=torch.long, device=self.mask.device))

    def buffer(self, x: torch.Tensor) -> torch.Tensor:
        """A zeroed [R * N + 1, C] buffer for `pad_into` (the last entry takes pad rows)."""
        return x.new_zeros(self.requests * self.width + 1, x.shape[-1])

    def pad_into(self, buf: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """x [rows, 1, C] into `buf` (a `buffer`) -> its [R, N, C] view (zeros where no row is)."""
        buf.zero_()
        buf[self.flat] = x[:, 0]
        return buf[: self.requests * self.width].view(self.requests, self.width, -1)

    def unpad(self, y: torch.Tensor) -> torch.Tensor:
        """[R, N, C] -> [rows, 1, C] (a pad row reads request 0's node 0)."""
        return y[self.slot, self.node][:, None]

    def call(self, kernel, params, state, *args):
        """A reference-contract recurrent kernel (activations..., mask) run over the padded layout."""
        return self.unpad(kernel(params, state, *(self.pad_into(self.buffer(a), a) for a in args[:-1]), self.mask))


def begin_packed(store: RecurrentStates, slots: torch.Tensor, offsets: torch.Tensor, mask: torch.Tensor,
                 row_start: torch.Tensor, *, chain: bool | None = None,
                 check: bool = True) -> tuple[PackedRows, RecurrentForward]:
    """A packed forward's recurrent view (both runners): its rows regrouped per request, and the
    RecurrentForward over [R, N] whose token n of request r is node n (RecurrentStates.begin's
    `chain` and `check`)."""
    rows = PackedRows.of(slots, offsets, mask, row_start)
    R, dev = rows.requests, rows.mask.device
    zeros = torch.zeros(R, dtype=torch.long, device=dev)
    return rows, store.begin(torch.arange(R, device=dev), zeros, rows.parents(), chain=chain, check=check)

