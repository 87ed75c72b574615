"""Gated delta node states kept as their WY factors instead of full states in the ring.

The tree kernel in WY form (gated_delta_wy.py) computes, per node t of a forward whose every node
starts from the committed state S (the delta rule over a tree, docs/HYBRID.md):
    S_t = e^{G_t} S + sum_{j in path(t)} e^{G_t - G_j} k_j u_j^T
with k_j the normalised key, u_j the WY-corrected value and G_t the log decay summed along t's
path. Writing every node's [Hv, Dk, Dv] fp32 state costs more than the rest of the kernel, so it
writes these factors (about 1/100 of the bytes) and the state of the one node a step commits is
rebuilt at commit (`_commit_kernel`), in place over the committed state it derives from.

Layout per (layer, state) key, per request slot, for the last factored forward (R nodes at most):
  k [R, Hv, Dk], u [R, Hv, Dv], g [R, Hv] fp32; path [R, R], depth [R] int32 (the node's
  ancestors in that forward, then itself, as RecurrentForward.paths); meta [3] int64: the ring's
  base at that forward, its first node, its node count.
Node n of a slot is factored iff count > 0, base[slot] == meta.base and first <= n < first +
count: the committed state has not changed since (a commit that changes it moves the base), so
the formula above still holds. reset() and every kernel that writes this key's nodes in full
(gated_delta.py) shrink or clear the range; `load_delta_state` reads a node's state either way.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from specir.runtime.recurrent_state import FactoredNodes

from ._state_ring import load_state

CAPACITY = 65  # nodes of one factored forward at most (the WY kernel's largest tile, 64, and a peeled root)


class DeltaFactors(FactoredNodes):
    """The factor buffers of one gated delta key (module docstring) and its commit."""

    def __init__(self, store, key, capacity: int):
        slots = store.slots
        hv, dk, dv = store.specs[key].shape
        self.capacity, dev = int(capacity), store.device
        self.k = torch.zeros(slots, self.capacity, hv, dk, dtype=torch.float32, device=dev)
        self.u = torch.zeros(slots, self.capacity, hv, dv, dtype=torch.float32, device=dev)
        self.g = torch.zeros(slots, self.capacity, hv, dtype=torch.float32, device=dev)
        self.path = torch.zeros(slots, self.capacity, self.capacity, dtype=torch.int32, device=dev)
        self.depth = torch.zeros(slots, self.capacity, dtype=torch.int32, device=dev)
        self.meta = torch.zeros(slots, 3, dtype=torch.int64, device=dev)

    def args(self):
        """The kernel arguments, in `load_delta_state`'s order."""
        return self.k, self.u, self.g, self.path, self.depth, self.meta, self.capacity

    def commit(self, store, key, slots, nodes) -> None:
        committed, scratch = store.committed[key], store.scratch[key]
        B = slots.shape[0]
        if B == 0:
            return
        hv, dk, dv = committed.shape[1:]
        block = min(64, triton.next_power_of_2(dv))
        _commit_kernel[(B, hv, triton.cdiv(dv, block))](
            committed, scratch, slots.contiguous(), nodes.contiguous(), store.base, store.nodes, *self.args(),
            HV=hv, DK=dk, DV=dv, DKP=triton.next_power_of_2(dk), BLOCK_V=block)

    def read(self, store, key, slots, nodes, states) -> torch.Tensor:
        states = states.clone()
        for b in range(slots.shape[0]):
            slot, node = int(slots[b]), int(nodes[b])
            mbase, first, count = (int(x) for x in self.meta[slot])
            if node < 0 or count <= 0 or int(store.base[slot]) != mbase or not first <= node < first + count:
                continue
            t = node - first
            G = self.g[slot, t]  # [Hv]
            s = store.committed[key][slot] * torch.exp(G)[:, None, None]
            for j in self.path[slot, t, : int(self.depth[slot, t])].tolist():
                w = torch.exp(G - self.g[slot, j])
                s = s + w[:, None, None] * self.k[slot, j][:, :, None] * self.u[slot, j][:, None, :]
            states[b] = s
        return states

    def reset(self, slots) -> None:
        self.meta[slots.to(self.meta.device, torch.long)] = 0


def attach_delta_factors(store, key, capacity: int = CAPACITY) -> DeltaFactors:
    """The DeltaFactors of `key` in `store` (made and attached on first use, outside any capture)."""
    found = store.factored.get(key)
    if found is None:
        found = store.attach_factored(key, DeltaFactors(store, key, min(capacity, store.nodes)))
    return found


@triton.jit
def factored_state(t, committed_row, slot, h, idx, dk, dv, in_k, in_v, mask, fk, fu, fg, fpath, fdepth, R,
                   HV: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr):
    """The [DKP, BLOCK_V] slice of head h's state after factored node t (forward-local) of `slot`."""
    s = tl.load(committed_row + idx, mask=mask, other=0.0)
    row = slot * R + t
    g_t = tl.load(fg + row * HV + h)
    s = s * tl.exp(g_t)
    for i in range(0, tl.load(fdepth + row)):
        j = slot * R + tl.load(fpath + row * R + i).to(tl.int64)
        w = tl.exp(g_t - tl.load(fg + j * HV + h))
        k = tl.load(fk + (j * HV + h) * DK + dk, mask=in_k, other=0.0)
        u = tl.load(fu + (j * HV + h) * DV + dv, mask=in_v, other=0.0)
        s = s + (k * w)[:, None] * u[None, :]
    return s


@triton.jit
def load_delta_state(node, limit, committed_row, scratch_ptr, slot, base, W, per_node, idx, mask,
                     fk, fu, fg, fpath, fdepth, fmeta, R, h, dk, dv, in_k, in_v,
                     HV: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr, FACTORS: tl.constexpr):
    """The state after `node` (-1: committed) as load_state, rebuilt from the factors when they hold
    it. Only nodes below `limit` (the reading forward's first node) are looked up in the factors:
    a forward's own nodes are written in full, whatever the factor record still says."""
    if FACTORS:
        mbase = tl.load(fmeta + slot * 3)
        first = tl.load(fmeta + slot * 3 + 1)
        count = tl.load(fmeta + slot * 3 + 2)
        if (node >= 0) & (node < limit) & (count > 0) & (mbase == base) & (node >= first) & (node < first + count):
            s = factored_state(node - first, committed_row, slot, h, idx, dk, dv, in_k, in_v, mask,
                               fk, fu, fg, fpath, fdepth, R, HV, DK, DV)
        else:
            s = load_state(node, committed_row, scratch_ptr, slot, base, W, per_node, idx, mask)
    else:
        s = load_state(node, committed_row, scratch_ptr, slot, base, W, per_node, idx, mask)
    return s


@triton.jit
def shrink_factored(fmeta, slot, base, first_node):
    """A forward that writes nodes from `first_node` on in full: the factor record keeps only the
    nodes before them (nothing, when the record is stale)."""
    mbase = tl.load(fmeta + slot * 3)
    first = tl.load(fmeta + slot * 3 + 1)
    count = tl.load(fmeta + slot * 3 + 2)
    kept = tl.maximum(tl.minimum(count, first_node - first), 0)
    tl.store(fmeta + slot * 3 + 2, tl.where(mbase == base, kept, 0))


@triton.jit
def _commit_kernel(committed_ptr, scratch_ptr, slots_ptr, nodes_ptr, base_ptr, W,
                   fk, fu, fg, fpath, fdepth, fmeta, R,
                   HV: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr, DKP: tl.constexpr, BLOCK_V: tl.constexpr):
    """Axis 0: the request; 1, 2: value head, value block. committed[slot] = state after node
    (-1: unchanged), each program over its own slice (so in place: it reads the slice first)."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    slot = tl.load(slots_ptr + b).to(tl.int64)
    node = tl.load(nodes_ptr + b).to(tl.int64)
    if node >= 0:
        dk = tl.arange(0, DKP)
        in_k = dk < DK
        dv = tl.program_id(2) * BLOCK_V + tl.arange(0, BLOCK_V)
        in_v = dv < DV
        m2 = in_k[:, None] & in_v[None, :]
        per_node = HV * DK * DV
        idx = h * DK * DV + dk[:, None] * DV + dv[None, :]
        committed = committed_ptr + slot * per_node
        base = tl.load(base_ptr + slot).to(tl.int64)
        s = load_delta_state(node, node + 1, committed, scratch_ptr, slot, base, W, per_node, idx, m2,
                             fk, fu, fg, fpath, fdepth, fmeta, R, h, dk, dv, in_k, in_v, HV, DK, DV, True)
        tl.store(committed + idx, s, mask=m2)
