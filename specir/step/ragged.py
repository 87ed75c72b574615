"""The ragged batch: the valid nodes of the live requests packed into one token list, no padding.

Contract (the layout vLLM's spec-decode metadata uses):
- `Ragged.offsets` [B + 1] int32, cumulative: request b owns packed tokens offsets[b] ..
  offsets[b + 1] - 1 (a frozen slot or an invalid node owns none); `request` [T] int64 (the slot of
  each packed token) and `node` [T] int64 (its node index in that request), request-major, nodes
  ascending, so a parent is packed before its children.
- `pack(nodes, live, rows=None)`: the valid nodes of the live requests, on the device, in a list of
  `rows` entries (a host-known bound of the packed total T, e.g. `capacity` of what a budget keeps:
  no host read, so a captured step can pack); rows past T are pad rows repeating row 0 (the same
  slot, node, token, position and mask row), and offsets[B] = T says where they start. The caller
  guarantees T <= rows. `rows=None` packs exactly T rows (a host read of T, for tests and tools).
- `capacity(bound)`: the forward size for at most `bound` packed tokens: exact up to 8, then a
  power of two up to 64, then a multiple of 64, so a long-lived engine builds a bounded set of
  forward shapes (each holds buffers of its size) instead of one per packed size.
- `allocate(size, width, device, requests=B)`: the inputs of a forward of `size` rows over a
  mask of `width` nodes; with `requests`, a row_start [B + 1] too (ForwardInputs: how rows group).
- `forward_inputs(ragged, nodes, lens, inputs)`: one forward over the packed list in the executor
  contract of specir.step.forward_inputs, as one-token rows: row i is request `request[i]`'s node
  `node[i]`, written at cache row lens + node of that request's slot, at position lens + depth,
  seeing its committed rows and the scratch rows of its ancestors (its tree-mask row; a chain:
  nodes 0..node); `inputs.row_start`, where allocated, gets `offsets`. Rows past offsets[B] are pad
  rows to an executor that reads row_start: it writes no KV for them (the Triton backend, which
  then computes their attention as zeros); one that ignores row_start computes them as row 0 and
  rewrites row 0's KV row with row 0's own values.
- `unpack(logits, ragged, B, N, buffers=None, most_rows=None)`: the packed logits [rows, 1, V] back at [B, N, V]
  (zero where a node was not verified: acceptance never reads those); pad rows are dropped. With
  `buffers` (a dict the caller keeps, e.g. in its op_state) the result is one buffer per
  (B, N, V, dtype, device) reused step after step: each call zeroes only the rows the previous
  call wrote there (their flat indices kept in a persistent buffer, so a captured replay zeroes
  the right rows), so the result is the same as a fresh one's, and is valid until the next call
  with the same `buffers`. That index buffer holds `most_rows` entries (the most rows any call
  passes: a caller that knows its forward sizes says so; default capacity(B * N)), so a step
  zeroes at most that many rows of V logits, not B * N (at batch 64 of a 64-node tree and a
  128k vocabulary, 1 GB). Capture-safe while calls stay within `most_rows` (a larger call
  regrows the index buffer, outside capture).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .forward_inputs import ForwardInputs
from .values import Nodes


@dataclass
class Ragged:
    offsets: torch.Tensor
    request: torch.Tensor
    node: torch.Tensor

    @property
    def rows(self) -> int:
        """Entries of the packed list (the packed total and then pad rows)."""
        return int(self.request.shape[0])

    def total(self) -> int:
        """The packed total T (a host read)."""
        return int(self.offsets[-1])

    def sizes(self) -> list[int]:
        """Packed tokens per request (host list)."""
        o = self.offsets.tolist()
        return [o[i + 1] - o[i] for i in range(len(o) - 1)]


def pack(nodes: Nodes, live: torch.Tensor, rows: int | None = None) -> Ragged:
    keep = nodes.valid & (live != 0)[:, None]
    B, N = keep.shape
    counts = keep.sum(dim=1).to(torch.int32)
    offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0).to(torch.int32)])
    if rows is None:
        rows = int(offsets[-1])
    # each kept node's place in the list (request-major, nodes ascending); dropped nodes go to row `rows`
    place = torch.where(keep, offsets[:-1, None].long() + keep.long().cumsum(dim=1) - 1, rows).reshape(-1)
    slot = torch.arange(B, device=keep.device)[:, None].expand(B, N).reshape(-1)
    index = torch.arange(N, device=keep.device)[None, :].expand(B, N).reshape(-1)
    first = keep.reshape(-1).long().argmax().reshape(1)  # row 0 (the first kept node): pad rows repeat it
    request = torch.div(first, N, rounding_mode="floor").repeat(rows + 1).scatter_(0, place, slot)
    node = (first % N).repeat(rows + 1).scatter_(0, place, index)
    return Ragged(offsets, request[:rows], node[:rows])


def capacity(bound: int) -> int:
    if bound <= 8:
        return bound
    if bound <= 64:
        return 1 << (bound - 1).bit_length()
    return -(-bound // 64) * 64


def allocate(total: int, width: int, device, requests: int | None = None) -> ForwardInputs:
    return ForwardInputs.allocate(total, 1, device, mask_width=width, slots=True, offsets=True, requests=requests)


def forward_inputs(ragged: Ragged, nodes: Nodes, lens: torch.Tensor, inputs: ForwardInputs) -> None:
    r, n = ragged.request, ragged.node
    N = nodes.width
    request_lens = lens.long()[r]
    inputs.ids[:, 0] = nodes.tokens[r, n]
    inputs.pos[:, 0] = request_lens + nodes.depths[r, n]
    inputs.lens.copy_(request_lens)
    inputs.slots.copy_(r)
    inputs.offsets.copy_(n)
    if inputs.row_start is not None:
        inputs.row_start.copy_(ragged.offsets)
    if nodes.mask is None:
        inputs.mask[:, 0] = torch.arange(N, device=n.device)[None, :] <= n[:, None]
    else:
        inputs.mask[:, 0] = nodes.mask[r, n]


@dataclass
class Unpacked:
    """A reused `unpack` result ([B * N + 1, V]: the last row takes pad rows) and the flat rows the
    last call wrote into it (a persistent buffer; unused entries point at the pad row)."""
    out: torch.Tensor
    written: torch.Tensor


def unpack(logits: torch.Tensor, ragged: Ragged, B: int, N: int, buffers: dict | None = None,
           most_rows: int | None = None) -> torch.Tensor:
    V, rows = logits.shape[-1], ragged.rows
    dump = B * N
    key = (B, N, V, logits.dtype, logits.device)
    entry = None if buffers is None else buffers.get(key)
    written = max(rows, most_rows or capacity(dump))
    if entry is None:
        entry = Unpacked(logits.new_zeros(dump + 1, V),
                         torch.full((written,), dump, dtype=torch.long, device=logits.device))
        if buffers is not None:
            buffers[key] = entry
    else:
        entry.out.index_fill_(0, entry.written, 0)
        if rows > entry.written.numel():  # past the declared most: a longer index buffer (outside capture)
            entry.written = torch.cat([entry.written, entry.written.new_full((rows - entry.written.numel(),), dump)])
    verified = torch.arange(rows, device=logits.device) < ragged.offsets[-1]
    flat = torch.where(verified, ragged.request * N + ragged.node, dump)
    entry.out.index_copy_(0, flat, logits[:rows, 0])
    entry.written.fill_(dump)
    entry.written[:rows] = flat
    return entry.out[:dump].view(B, N, V)
