"""The gated delta tree kernel in WY form (backends/triton/kernels/gated_delta_wy.py) and its
factored node states (delta_factors.py) against the reference kernel's recurrence, under
TRITON_INTERPRET=1 without a GPU (compiled with one).

A tree forward from the committed state keeps factors, not states: its outputs, every node's
state rebuilt from the factors (`node_states`) and the committed state after committing any node
must equal the reference's. Forwards after it read those nodes through the factors (a tree that
continues one: per-node replay in the same kernel; a chain that continues one: the walk), and a
forward that rewrites the factored nodes' indices takes them over in full. Fp32 tolerance 1e-5
relative (another order of sums); bf16 activations 2e-2."""
from __future__ import annotations

import os
import types

import pytest
import torch

from tests.helpers.tolerance import close

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

from specir.ir.ops_recurrent import StateSpec  # noqa: E402
from specir.runtime.recurrent_state import RecurrentStates  # noqa: E402

triton = pytest.importorskip("triton")
from specir.backends.reference import recurrent as ref  # noqa: E402
from specir.backends.triton.kernels import gated_delta  # noqa: E402
from specir.backends.triton.kernels.delta_factors import attach_delta_factors  # noqa: E402

SLOTS, NODES, KEY = 4, 72, (0, "s")
REQUEST_SLOTS = [2, 0, 3]
HK, HV, DK, DV = 2, 4, 16, 24


class Pair:
    """The same random store twice: the reference's (full ring states) and the kernel's (factors)."""

    def __init__(self, gen):
        shape = (HV, DK, DV)
        base = torch.randint(0, NODES, (SLOTS,), generator=gen)
        committed = torch.randn(SLOTS, *shape, generator=gen)
        self.stores = []
        for factored in (False, True):
            store = RecurrentStates([StateSpec(0, "s", shape, "f32")], SLOTS, NODES, torch.float32, DEVICE)
            store.committed[KEY].copy_(committed)
            store.base.copy_(base)
            if factored:
                attach_delta_factors(store, KEY)
            self.stores.append(store)
        self.slots = torch.tensor(REQUEST_SLOTS, device=DEVICE)
        a_log = torch.log(torch.rand(HV, generator=gen) * 4 + 0.5)
        dt_bias = torch.randn(HV, generator=gen)
        self.params = {"layer": 0, "state": "s", "a_log": a_log.to(DEVICE), "dt_bias": dt_bias.to(DEVICE),
                       "k_heads": HK, "v_heads": HV, "k_dim": DK, "v_dim": DV}

    def forward(self, offsets, parents, gen, dtype, chain=None, variant=None):
        B, T = parents.shape
        qkv = torch.randn(B, T, 2 * HK * DK + HV * DV, generator=gen).to(DEVICE, dtype)
        b, a = (torch.randn(B, T, HV, generator=gen).to(DEVICE, dtype) for _ in range(2))
        outs, rfs = [], []
        for store, run in zip(self.stores, (self._reference, self._kernel)):
            rf = store.begin(self.slots, offsets.to(DEVICE), parents.to(DEVICE), chain=chain)
            outs.append(run(rf, qkv, b, a, variant))
            rfs.append(rf)
        return outs, rfs

    def _reference(self, rf, qkv, b, a, variant):
        return ref.gated_delta_rule(self.params, types.SimpleNamespace(recurrent=rf), qkv, b, a, None)

    def _kernel(self, rf, qkv, b, a, variant):
        p = self.params
        return gated_delta.gated_delta_rule_tree(qkv, b, a, p["a_log"], p["dt_bias"], rf,
                                                 KEY, k_heads=HK, v_heads=HV, k_dim=DK, v_dim=DV, variant=variant)

    def node_states(self, nodes):
        return [store.node_states(KEY, self.slots, nodes.to(DEVICE)) for store in self.stores]

    def commit(self, nodes, advance=None):
        for store in self.stores:
            store.commit(self.slots, nodes.to(DEVICE), None if advance is None else advance.to(DEVICE))
        return [store.committed[KEY] for store in self.stores]


def _tree(T, gen, offsets=None, outside=None, rooted=False):
    """parents [B, T]: random trees over this forward's nodes (roots from the committed state, or,
    with `outside`, from the earlier nodes below offsets; `rooted`: node 0 is the one root, as in a
    verify of the pending token and its draft)."""
    B = len(REQUEST_SLOTS)
    offsets = torch.zeros(B, dtype=torch.long) if offsets is None else offsets
    parents = torch.full((B, T), -1, dtype=torch.long)
    for b in range(B):
        off = int(offsets[b])
        for t in range(1 if outside is None else 0, T):
            low = -1 if outside is None and not rooted else 0
            parents[b, t] = int(torch.randint(low, off + t, (1,), generator=gen))
    return offsets, parents


def _variant_run(monkeypatch):
    """Record which variant each gated delta launch runs."""
    seen = []
    real = gated_delta.replays_paths
    monkeypatch.setattr(gated_delta, "replays_paths", lambda rf, T: seen.append(T) or real(rf, T))
    return seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T,shape", [(5, "forest"), (17, "forest"), (17, "rooted"), (24, "forest"), (33, "rooted"),
                                     (17, "chain"), (65, "rooted"), (65, "chain")])
def test_a_tree_from_the_committed_state_keeps_factors_that_rebuild_every_node_and_the_commit(dtype, T, shape,
                                                                                              seed):
    """T = 17 and 65 are one past the tile: the kernel peels token 0 (under it: every token when
    rooted, some of them in a random forest; a chain's last path runs past the tile; 65: the factor
    capacity, a verify of a 64-token draft); T = 24 and 33 run in a 64-token tile (never a 32-token
    one: gated_delta_wy's SLOW_TILE), most of it padding."""
    gen = torch.Generator().manual_seed(seed)
    pair = Pair(gen)
    offsets, parents = _tree(T, gen, rooted=shape == "rooted")
    if shape == "chain":  # a chain-shaped tree (a top-1 tree draft), verified as a tree
        parents = torch.arange(T)[None, :].expand(len(REQUEST_SLOTS), T) - 1
    (o_ref, o_wy), (rf_ref, rf_wy) = pair.forward(offsets, parents, gen, dtype, chain=False)
    # a 64-deep chain's solve squares L six times: fp32 rounding grows to a few 1e-5
    fp32 = 1e-4 if shape == "chain" and T > 33 else None
    close(o_wy, o_ref, dtype, tol=fp32 if dtype == torch.float32 else None)
    meta = pair.stores[1].factored[KEY].meta[pair.slots]
    assert meta[:, 2].tolist() == [T] * len(REQUEST_SLOTS)  # the kernel took the WY form
    ring = pair.stores[1].scratch[KEY]
    assert not ring.any(), "a factored forward writes no node state"
    for t in range(T):
        s_ref, s_wy = pair.node_states(rf_ref.nodes[:, t])
        close(s_wy, s_ref, torch.float32, tol=fp32)
    pick = torch.tensor([int(torch.randint(0, T, (1,), generator=gen)) for _ in REQUEST_SLOTS])
    pick[1] = -1  # request 1 keeps its committed state
    c_ref, c_wy = pair.commit(pick, advance=torch.where(pick >= 0, pick + 1, 0))
    close(c_wy, c_ref, torch.float32, tol=fp32)
    # after the commit the factors are stale: a node of the new ring reads what the ring holds
    s_ref, s_wy = pair.node_states(torch.tensor([-1, 0, -1]))
    close(s_wy[[0, 2]], s_ref[[0, 2]], torch.float32, tol=fp32)


def test_a_tree_continuing_a_factored_tree_replays_its_paths_from_the_factors(seed):
    gen = torch.Generator().manual_seed(seed)
    pair = Pair(gen)
    T0 = 6
    pair.forward(*_tree(T0, gen), gen, torch.float32)
    offsets, parents = _tree(5, gen, offsets=torch.full((3,), T0), outside=True)
    (o_ref, o_new), (rf_ref, _) = pair.forward(offsets, parents, gen, torch.float32)
    close(o_new, o_ref, torch.float32)
    for t in range(5):
        s_ref, s_new = pair.node_states(rf_ref.nodes[:, t])
        close(s_new, s_ref, torch.float32)
    pick = torch.tensor([T0 + 4, 2, T0])  # a node of the second forward, one of the first, one of the second
    c_ref, c_new = pair.commit(pick)
    close(c_new, c_ref, torch.float32)


def test_a_peeled_forward_whose_root_continues_an_earlier_forward_replays_its_paths(seed):
    """17 tokens: token 0 continues the first forward's node, the others start from the committed state
    (none under token 0): only token 0's start sends the kernel to the replay branch."""
    gen = torch.Generator().manual_seed(seed)
    pair = Pair(gen)
    T0, T = 6, 17
    pair.forward(*_tree(T0, gen), gen, torch.float32)
    B = len(REQUEST_SLOTS)
    offsets = torch.full((B,), T0)
    parents = torch.full((B, T), -1, dtype=torch.long)
    parents[:, 0] = torch.tensor([int(torch.randint(0, T0, (1,), generator=gen)) for _ in range(B)])
    for t in range(2, T):
        parents[:, t] = torch.tensor([int(torch.randint(T0, T0 + t, (1,), generator=gen)) for _ in range(B)])
        parents[:, t] = torch.where(parents[:, t] == T0, -1, parents[:, t])  # never under token 0
    (o_ref, o_new), (rf_ref, _) = pair.forward(offsets, parents, gen, torch.float32, chain=False)
    close(o_new, o_ref, torch.float32)
    for t in range(T):
        s_ref, s_new = pair.node_states(rf_ref.nodes[:, t])
        close(s_new, s_ref, torch.float32)
    c_ref, c_new = pair.commit(rf_ref.nodes[:, T - 1])
    close(c_new, c_ref, torch.float32)


@pytest.mark.parametrize("offset", [0, 6])
def test_a_chain_after_a_factored_tree_reads_or_replaces_its_nodes(offset, seed):
    """offset 6: the chain continues from the tree's node 5 (read through the factors); offset 0:
    it rewrites nodes 0.. (a retried step), which must then be read from the ring, not the factors."""
    gen = torch.Generator().manual_seed(seed)
    pair = Pair(gen)
    pair.forward(*_tree(6, gen), gen, torch.float32)
    B = len(REQUEST_SLOTS)
    offsets = torch.full((B,), offset)
    parents = offsets[:, None] + torch.arange(4)[None, :] - 1
    (o_ref, o_new), (rf_ref, _) = pair.forward(offsets, parents, gen, torch.float32, chain=True)
    close(o_new, o_ref, torch.float32)
    for t in range(4):
        s_ref, s_new = pair.node_states(rf_ref.nodes[:, t])
        close(s_new, s_ref, torch.float32)
    c_ref, c_new = pair.commit(rf_ref.nodes[:, 2])
    close(c_new, c_ref, torch.float32)


def test_a_reset_forgets_the_factors(seed):
    gen = torch.Generator().manual_seed(seed)
    pair = Pair(gen)
    pair.forward(*_tree(6, gen), gen, torch.float32)
    for store in pair.stores:
        store.reset(pair.slots)
    assert not pair.stores[1].factored[KEY].meta[pair.slots, 2].any()
    store = pair.stores[1]
    nodes = torch.tensor([3, 3, 3], device=DEVICE)
    ring = store.scratch[KEY][pair.slots, store.ring(pair.slots, nodes)]
    assert torch.equal(store.node_states(KEY, pair.slots, nodes), ring)  # not rebuilt from the factors


def test_trees_past_the_factor_capacity_and_chains_write_states_in_full(seed):
    gen = torch.Generator().manual_seed(seed)
    pair = Pair(gen)
    pair.stores[1].factored[KEY].capacity = 4
    (o_ref, o_new), _ = pair.forward(*_tree(6, gen), gen, torch.float32)
    close(o_new, o_ref, torch.float32)
    assert not pair.stores[1].factored[KEY].meta[:, 2].any()
    assert pair.stores[1].scratch[KEY].any()
