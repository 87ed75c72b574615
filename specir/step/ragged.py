"""The ragged batch: the valid nodes of the live requests packed into one token list, no padding.

Contract (the layout vLLM's spec-decode metadata uses):
- `Ragged.offsets` [B + 1] int32, cumulative: request b owns packed tokens offsets[b] ..
  offsets[b + 1] - 1 (a frozen slot or an invalid node owns none); `request` [T] int64 (the slot of
  each packed token) and `node` [T] int64 (its node index in that request), request-major, nodes
  ascending, so a parent is packed before its children.
- `pack(nodes, live)`: the valid nodes of the live requests (a host read: the total T is data).
- `allocate(size, width, device, requests=B)`: the inputs of a forward of `size` rows over a
  mask of `width` nodes; with `requests`, a row_start [B + 1] too (ForwardInputs: how rows group).
- `forward_inputs(ragged, nodes, lens, inputs)`: one forward over the packed list in the executor
  contract of specir.step.forward_inputs, as T one-token rows: row i is request `request[i]`'s node
  `node[i]`, written at cache row lens + node of that request's slot, at position lens + depth,
  seeing its committed rows and the scratch rows of its ancestors (its tree-mask row; a chain:
  nodes 0..node); `inputs.row_start`, where allocated, gets `offsets`. Every linear layer runs
  over exactly T rows.
- `unpack(logits, ragged, B, N, buffers=None)`: the packed logits [T', 1, V] (T' >= T) back at
  [B, N, V] (zero where a node was not verified: acceptance never reads those); rows past T are
  dropped. With `buffers` (a dict the caller keeps, e.g. in its op_state) the result is one buffer
  per (B, N, V, dtype, device) reused step after step: each call zeroes only the rows the previous
  call wrote there (the rest are zero already), so the result is the same as a fresh one's, and is
  valid until the next call with the same `buffers`.
- `bucket(T)` / `padded(ragged, size)`: the forward runs over `bucket(T)` rows (T rounded up to a
  power of two from 8 on; `buckets(most)` lists every such size up to `bucket(most)`), so a
  long-lived engine builds a bounded set of forward shapes (each holds buffers of its size)
  instead of one per packed size; a pad row repeats row 0 (the same
  slot, node, token, position and mask row) and its logits are dropped. Rows past offsets[B] are
  pad rows to an executor that reads row_start: it writes no KV for them (the Triton backend,
  which then computes their attention as zeros); one that ignores row_start computes them as
  row 0 and rewrites row 0's KV row with row 0's own values.
- `first_row(ragged)`: the packing of its first token alone (offsets say so: every other row of a
  forward over it is a pad row).
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
    def total(self) -> int:
        return int(self.request.shape[0])

    def sizes(self) -> list[int]:
        """Packed tokens per request (host list)."""
        o = self.offsets.tolist()
        return [o[i + 1] - o[i] for i in range(len(o) - 1)]


def pack(nodes: Nodes, live: torch.Tensor) -> Ragged:
    keep = nodes.valid & (live != 0)[:, None]
    counts = keep.sum(dim=1).to(torch.int32)
    offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0).to(torch.int32)])
    request, node = keep.nonzero(as_tuple=True)
    return Ragged(offsets, request, node)


def bucket(total: int) -> int:
    return total if total <= 8 else 1 << (total - 1).bit_length()


def buckets(most: int) -> list[int]:
    """Every forward size `bucket` gives for packed totals 1 .. most."""
    sizes = list(range(1, min(most, 8) + 1))
    size = 16
    while most > 8 and size // 2 < most:
        sizes.append(size)
        size *= 2
    return sizes


def first_row(ragged: Ragged) -> Ragged:
    """The packing of its first token alone: its request owns row 0, every other request none
    (padded to any size, the other rows are pad rows). Offsets computed on the device."""
    slots = torch.arange(ragged.offsets.shape[0], device=ragged.request.device)
    return Ragged((slots > ragged.request[0]).to(torch.int32), ragged.request[:1], ragged.node[:1])


def padded(ragged: Ragged, size: int) -> Ragged:
    extra = size - ragged.total
    if extra <= 0:
        return ragged
    return Ragged(ragged.offsets, torch.cat([ragged.request, ragged.request[:1].expand(extra)]),
                  torch.cat([ragged.node, ragged.node[:1].expand(extra)]))


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
    """A reused `unpack` result and the (request, node) rows the last call wrote into it."""
    out: torch.Tensor
    request: torch.Tensor | None = None
    node: torch.Tensor | None = None


def unpack(logits: torch.Tensor, ragged: Ragged, B: int, N: int, buffers: dict | None = None) -> torch.Tensor:
    V = logits.shape[-1]
    if buffers is None:
        out = logits.new_zeros(B, N, V)
    else:
        key = (B, N, V, logits.dtype, logits.device)
        entry = buffers.get(key)
        if entry is None:
            entry = buffers[key] = Unpacked(logits.new_zeros(B, N, V))
        else:
            entry.out[entry.request, entry.node] = 0
        entry.request, entry.node = ragged.request, ragged.node
        out = entry.out
    out[ragged.request, ragged.node] = logits[:ragged.total, 0]
    return out
