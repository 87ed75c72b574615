"""The PATHS variant of the conv1d tree kernel (backends/triton/kernels/conv1d.py: one program per
tree node, gathering its window from its path) against the walk over the tokens, under
TRITON_INTERPRET=1 without a GPU.

Random trees (branches deeper than the window, so windows hold the start window, ancestors'
inputs or both; roots restarting mid-forward; a forward continuing from a scratch node of an earlier forward, start >=
0; two requests with different trees), K = 4, 3 and 2, with and without bias, fp32 and bf16:
outputs and the whole scratch ring (every node's written window, nothing else touched) must be
bit-identical to the walk's, and match the reference kernel (backends/reference/recurrent.py) to
rounding. Fresh random inputs per test (the seed is printed; pin it with SPECIR_TEST_SEED)."""
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
from specir.backends.triton.kernels import conv1d as conv_mod  # noqa: E402

SLOTS, NODES = 4, 16

KEY = (0, "s")

# (id, request slots, T, C, K, bias, offsets (earlier nodes held per request), block_c)
CASES = [
    ("k4_bias", [2], 9, 40, 4, True, [0], 16),
    ("k2_nobias", [1], 7, 24, 2, False, [0], 128),
    ("k3_continue", [0], 8, 33, 3, True, [3], 16),
    ("b2_k4_continue", [3, 1], 10, 48, 4, False, [2, 0], 32),
    ("b2_k3_bias", [1, 2], 6, 16, 3, True, [0, 1], 128),
]


def _parents(offsets, T, K, gen):
    """Random tree parents [B, T]: a continuing request's first token starts from its last node
    (else -1), token 2 branches off token 0 (never a chain) and tokens 3 .. K + 1 extend it (a path
    deeper than the window), the last token is a new root (padding); the rest extend the previous
    token or pick any earlier node or -1."""
    parents = torch.full((len(offsets), T), -1, dtype=torch.long)
    for b, off in enumerate(offsets):
        for t in range(T):
            node = off + t
            if t == 0:
                parents[b, t] = off - 1
            elif t == 2:
                parents[b, t] = off
            elif 3 <= t <= K + 1 or float(torch.rand((), generator=gen)) < 0.5:
                parents[b, t] = node - 1
            else:
                parents[b, t] = int(torch.randint(-1, node, (1,), generator=gen))
        parents[b, T - 1] = -1
    return parents


def _stores(slots, offsets, parents, C, K, dtype, gen, copies):
    """`copies` identical stores with random committed windows and ring, and the forward on each."""
    shape = (C, K - 1)
    base = torch.randint(0, NODES, (SLOTS,), generator=gen)
    committed = torch.randn(SLOTS, *shape, generator=gen)
    scratch = torch.randn(SLOTS, NODES, *shape, generator=gen)
    out = []
    for _ in range(copies):
        store = RecurrentStates([StateSpec(0, "s", shape, "act")], SLOTS, NODES, dtype, DEVICE)
        store.committed[KEY].copy_(committed)
        store.scratch[KEY].copy_(scratch)
        store.base.copy_(base)
        for slot, off in zip(slots, offsets):  # the earlier forward's nodes are held
            for n in range(off):
                store.owner[slot, (int(base[slot]) + n) % NODES] = int(base[slot]) + n
        rf = store.begin(torch.tensor(slots, device=DEVICE), torch.tensor(offsets, device=DEVICE),
                         parents.to(DEVICE))
        out.append((store, rf))
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_path_replay_equals_the_walk(case, dtype, seed):
    _, slots, T, C, K, has_bias, offsets, block_c = case
    gen = torch.Generator().manual_seed(seed)
    parents = _parents(offsets, T, K, gen)
    runs = _stores(slots, offsets, parents, C, K, dtype, gen, copies=4)
    B = len(slots)
    x = torch.randn(B, T, C, generator=gen).to(DEVICE, dtype)
    w = (torch.randn(C, 1, K, generator=gen) * 0.5).to(DEVICE, dtype)
    bias = (torch.randn(C, generator=gen) * 0.1).to(DEVICE, dtype) if has_bias else None

    rf = runs[0][1]
    assert not rf.chain and conv_mod.replays_paths(rf, T)  # the rule picks PATHS for these trees
    _, depth, start = rf.paths()
    assert int(depth.max()) > K - 1  # some windows hold only ancestors' inputs
    assert int(depth.min()) < K - 1 or K == 2  # some mix the start window in
    if any(offsets):
        assert bool((start >= 0).any())  # a path starts from an earlier forward's node

    outs = [conv_mod.conv1d_tree(x, w, bias, rf_, KEY, activation="silu", block_c=block_c, paths=p)
            for (_, rf_), p in zip(runs[:3], (True, False, None))]
    scratch = [store.scratch[KEY] for store, _ in runs[:3]]
    if DEVICE == "cpu":  # the interpreter runs both variants' arithmetic in the same order
        assert torch.equal(outs[0], outs[1]), "PATHS output differs from the walk's"
    else:  # compiled, the two variants may reduce the window or contract multiply-adds differently (an
        close(outs[0], outs[1], dtype)  # fp32 rounding; seen on an H200), as gated delta's two variants may
    assert torch.equal(scratch[0], scratch[1]), "PATHS node windows (or other ring rows) differ from the walk's"
    assert torch.equal(outs[2], outs[0]) and torch.equal(scratch[2], scratch[0])  # paths=None: PATHS

    store_ref, rf_ref = runs[3]
    params = {"layer": 0, "state": "s", "weight": w, "activation": "silu"}
    if bias is not None:
        params["bias"] = bias
    out_ref = ref.conv1d(params, types.SimpleNamespace(recurrent=rf_ref), x, None)
    close(outs[0], out_ref, dtype)
    pos = store_ref.ring(rf_ref.slots, rf_ref.nodes)
    rows = rf_ref.slots[:, None].expand_as(pos)
    assert torch.equal(scratch[0][rows, pos], store_ref.scratch[KEY][rows, pos])  # windows are copies: exact
    assert torch.equal(scratch[0], store_ref.scratch[KEY])


def test_the_walk_runs_for_chains_and_forwards_longer_than_the_ring(monkeypatch):
    """paths=None follows replays_paths: no path tables are built for a chain or a tree of more
    nodes than the ring holds (which must write its nodes in order)."""
    gen = torch.Generator().manual_seed(0)
    calls = []
    long_tree = torch.arange(-1, NODES + 1)[None, :].clone()
    long_tree[0, 2] = 0  # token 2 branches off token 0
    for T, parents in ((5, torch.arange(-1, 4)[None, :]), (NODES + 2, long_tree)):
        (store, rf), = _stores([0], [0], parents, 8, 4, torch.float32, gen, copies=1)
        monkeypatch.setattr(rf, "paths", lambda: calls.append(T))
        x = torch.randn(1, T, 8, generator=gen).to(DEVICE)
        w = torch.randn(8, 1, 4, generator=gen).to(DEVICE)
        conv_mod.conv1d_tree(x, w, None, rf, KEY)
    assert calls == []
