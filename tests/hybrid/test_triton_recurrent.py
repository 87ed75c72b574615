"""Triton kernels of the recurrent ops (backends/triton/kernels/{conv1d,gated_delta,mamba2_scan}.py)
against the reference kernels, under TRITON_INTERPRET=1 without a GPU (compiled with one).

Every case builds a state store with random committed and scratch states, a ring base that
wraps, and requests on non-contiguous slots, then runs the same forward through the reference
kernel and the Triton kernel on two copies of the store: a decode step (one token), a chain
verify (five tokens, parent = previous token), a tree verify (random parents, padded), and a
continuation (offsets > 0: the first token's parent is a node of an earlier forward). Outputs and
every written node state must agree, and so must the committed state after committing a node.
Fresh random inputs per test (the seed is printed; pin it with SPECIR_TEST_SEED).
Tolerance (|a - e| <= tol * (|e| + rms(e))): fp32 1e-5; bf16 2e-2 (activations rounded once on
each side from fp32 sums taken in another order)."""
from __future__ import annotations

import os
import types

import pytest
import torch

from tests.helpers.tolerance import close

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # compiled kernels need device tensors

from specir.ir.ops_recurrent import StateSpec  # noqa: E402
from specir.runtime.recurrent_state import RecurrentStates  # noqa: E402

triton = pytest.importorskip("triton")
from specir.backends.reference import recurrent as ref  # noqa: E402
from specir.backends.triton.kernels.conv1d import conv1d_tree  # noqa: E402
from specir.backends.triton.kernels.gated_delta import gated_delta_rule_tree  # noqa: E402
from specir.backends.triton.kernels.mamba2_scan import mamba2_scan_tree  # noqa: E402


SLOTS, NODES = 4, 7
REQUEST_SLOTS = [2, 0, 3]
MODES = ["decode", "chain", "tree", "continue"]


def _forward_shape(mode, gen):
    """(T, offsets, parents [B, T]) for a mode; offsets index earlier scratch nodes."""
    B = len(REQUEST_SLOTS)
    T = {"decode": 1, "chain": 5, "tree": 6, "continue": 4}[mode]
    offsets = torch.zeros(B, dtype=torch.long) if mode != "continue" else torch.tensor([2, 1, 3])
    parents = torch.full((B, T), -1, dtype=torch.long)
    for b in range(B):
        off = int(offsets[b])
        for t in range(T):
            node = off + t
            if mode in ("chain", "decode", "continue"):
                parents[b, t] = node - 1
            elif t > 0 and (b < 2 or t < 4):  # request 2's last tokens are padding (parent -1)
                parents[b, t] = int(torch.randint(-1, node, (1,), generator=gen))
    return T, offsets, parents


def _scenario(spec_shape, dtype, mode, gen, device):
    """Two identical stores with random states, and the forward's RecurrentForward on each."""
    spec = StateSpec(0, "s", spec_shape, "f32" if dtype is None else "act")
    act = torch.float32 if dtype is None else dtype
    stores = []
    T, offsets, parents = _forward_shape(mode, gen)
    base = torch.randint(0, NODES, (SLOTS,), generator=gen).to(device)
    committed = torch.randn(SLOTS, *spec_shape, generator=gen).to(device)
    scratch = torch.randn(SLOTS, NODES, *spec_shape, generator=gen).to(device)
    for _ in range(2):
        store = RecurrentStates([spec], SLOTS, NODES, act, device)
        store.committed[(0, "s")].copy_(committed)
        store.scratch[(0, "s")].copy_(scratch)
        store.base.copy_(base)
        slots = torch.tensor(REQUEST_SLOTS, device=device)
        for b, slot in enumerate(REQUEST_SLOTS):  # the earlier forward's nodes are held
            for n in range(int(offsets[b])):
                store.owner[slot, (int(base[slot]) + n) % NODES] = int(base[slot]) + n
        rf = store.begin(slots, offsets.to(device), parents.to(device))
        stores.append((store, rf))
    return stores, T


def _check(stores, out_ref, out_tri, dtype):
    act = out_ref.dtype
    close(out_tri, out_ref, act)
    (s_ref, rf_ref), (s_tri, _) = stores
    key = (0, "s")
    pos = s_ref.ring(rf_ref.slots, rf_ref.nodes)
    rows = rf_ref.slots[:, None].expand_as(pos)
    close(s_tri.scratch[key][rows, pos], s_ref.scratch[key][rows, pos], torch.float32 if dtype is None else act)
    last = rf_ref.nodes[:, -1]
    for store in (s_ref, s_tri):
        store.commit(rf_ref.slots, last)
    close(s_tri.committed[key], s_ref.committed[key], torch.float32 if dtype is None else act)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kernel", [4, 2])
def test_conv1d(mode, dtype, kernel, seed, device=DEVICE):
    gen = torch.Generator().manual_seed(seed)
    C = 48
    stores, T = _scenario((C, kernel - 1), dtype, mode, gen, device)
    x = torch.randn(len(REQUEST_SLOTS), T, C, generator=gen).to(DEVICE, dtype)
    w = (torch.randn(C, 1, kernel, generator=gen) * 0.5).to(DEVICE, dtype)
    bias = (torch.randn(C, generator=gen) * 0.1).to(DEVICE, dtype)
    params = {"layer": 0, "state": "s", "weight": w, "bias": bias, "activation": "silu"}
    out_ref = ref.conv1d(params, types.SimpleNamespace(recurrent=stores[0][1]), x, None)
    out_tri = conv1d_tree(x, w, bias, stores[1][1], (0, "s"), activation="silu")
    _check(stores, out_ref, out_tri, dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gated_delta_rule(mode, dtype, seed, device=DEVICE):
    gen = torch.Generator().manual_seed(seed)
    hk, hv, dk, dv = 2, 4, 16, 12
    stores, T = _scenario((hv, dk, dv), None, mode, gen, device)
    B = len(REQUEST_SLOTS)
    qkv = torch.randn(B, T, 2 * hk * dk + hv * dv, generator=gen).to(DEVICE, dtype)
    b = torch.randn(B, T, hv, generator=gen).to(DEVICE, dtype)
    a = torch.randn(B, T, hv, generator=gen).to(DEVICE, dtype)
    a_log = torch.log(torch.rand(hv, generator=gen) * 4 + 0.5).to(DEVICE, dtype)
    dt_bias = torch.randn(hv, generator=gen).to(DEVICE, dtype)
    params = {"layer": 0, "state": "s", "a_log": a_log, "dt_bias": dt_bias, "k_heads": hk, "v_heads": hv,
              "k_dim": dk, "v_dim": dv}
    out_ref = ref.gated_delta_rule(params, types.SimpleNamespace(recurrent=stores[0][1]), qkv, b, a, None)
    out_tri = gated_delta_rule_tree(qkv, b, a, a_log, dt_bias, stores[1][1], (0, "s"), k_heads=hk, v_heads=hv,
                                    k_dim=dk, v_dim=dv)
    _check(stores, out_ref, out_tri, None)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dt_limit", [(0.0, float("inf")), (0.05, 0.5)])
def test_mamba2_scan(mode, dtype, dt_limit, seed, device=DEVICE):
    gen = torch.Generator().manual_seed(seed)
    H, P, G, N = 4, 12, 2, 16
    stores, T = _scenario((H, P, N), None, mode, gen, device)
    B = len(REQUEST_SLOTS)
    xbc = torch.randn(B, T, H * P + 2 * G * N, generator=gen).to(DEVICE, dtype)
    dt = torch.randn(B, T, H, generator=gen).to(DEVICE, dtype)
    a_log = torch.log(torch.arange(1, H + 1).float()).to(DEVICE, dtype)
    d = torch.randn(H, generator=gen).to(DEVICE, dtype)
    dt_bias = torch.randn(H, generator=gen).to(DEVICE, dtype)
    params = {"layer": 0, "state": "s", "a_log": a_log, "d": d, "dt_bias": dt_bias, "heads": H, "head_dim": P,
              "groups": G, "state_size": N, "dt_min": dt_limit[0], "dt_max": dt_limit[1]}
    out_ref = ref.mamba2_scan(params, types.SimpleNamespace(recurrent=stores[0][1]), xbc, dt, None)
    out_tri = mamba2_scan_tree(xbc, dt, a_log, d, dt_bias, stores[1][1], (0, "s"), heads=H, head_dim=P, groups=G,
                               state_size=N, dt_min=dt_limit[0], dt_max=dt_limit[1])
    _check(stores, out_ref, out_tri, None)


def _delta_case(gen, B, T, dtype):
    from specir.backends.triton.kernels import gated_delta
    hk, hv, dk, dv = 2, 4, 16, 12
    qkv = torch.randn(B, T, 2 * hk * dk + hv * dv, generator=gen).to(DEVICE, dtype)
    b_in, a_in = (torch.randn(B, T, hv, generator=gen).to(DEVICE, dtype) for _ in range(2))
    a_log = torch.log(torch.rand(hv, generator=gen) * 4 + 0.5).to(DEVICE, dtype)
    dt_bias = torch.randn(hv, generator=gen).to(DEVICE, dtype)
    return gated_delta, (hv, dk, dv), lambda rf: gated_delta.gated_delta_rule_tree(
        qkv, b_in, a_in, a_log, dt_bias, rf, (0, "s"), k_heads=hk, v_heads=hv, k_dim=dk, v_dim=dv)


def _ssm_case(gen, B, T, dtype):
    from specir.backends.triton.kernels import mamba2_scan
    H, P, G, N = 4, 12, 2, 16
    xbc = torch.randn(B, T, H * P + 2 * G * N, generator=gen).to(DEVICE, dtype)
    dt = torch.randn(B, T, H, generator=gen).to(DEVICE, dtype)
    a_log = torch.log(torch.arange(1, H + 1).float()).to(DEVICE, dtype)
    d, dt_bias = (torch.randn(H, generator=gen).to(DEVICE, dtype) for _ in range(2))
    return mamba2_scan, (H, P, N), lambda rf: mamba2_scan.mamba2_scan_tree(
        xbc, dt, a_log, d, dt_bias, rf, (0, "s"), heads=H, head_dim=P, groups=G, state_size=N,
        dt_min=0.05, dt_max=0.5)


@pytest.mark.parametrize("case", [_delta_case, _ssm_case], ids=["gated_delta", "mamba2_scan"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tree_path_replay_is_bit_identical_to_the_walk(case, dtype, seed, monkeypatch, device=DEVICE):
    """A tree forward runs one program per node replaying its path (the PATHS variant); its
    outputs and node states equal, bit for bit under the interpreter (to fp32 rounding when
    compiled), the one-program walk over the tokens that the
    kernel runs for chains, on trees whose roots start from the committed state, from a node of an
    earlier forward, or (padding) restart mid-forward."""
    gen = torch.Generator().manual_seed(seed)
    B, T = len(REQUEST_SLOTS), 6
    offsets = torch.tensor([1, 0, 1])  # offsets + T - 1 - (any earlier node) < NODES: no slot aliases
    parents = torch.full((B, T), -1, dtype=torch.long)
    for b in range(B):
        for t in range(T):
            parents[b, t] = int(torch.randint(-1, int(offsets[b]) + t, (1,), generator=gen))
    module, shape, run = case(gen, B, T, dtype)
    spec = StateSpec(0, "s", shape, "f32")
    base = torch.randint(0, NODES, (SLOTS,), generator=gen).to(device)
    committed = torch.randn(SLOTS, *shape, generator=gen).to(device)
    scratch = torch.randn(SLOTS, NODES, *shape, generator=gen).to(device)
    results = []
    for replay in (True, False):
        store = RecurrentStates([spec], SLOTS, NODES, dtype, device)
        store.committed[(0, "s")].copy_(committed)
        store.scratch[(0, "s")].copy_(scratch)
        store.base.copy_(base)
        for b, slot in enumerate(REQUEST_SLOTS):
            for n in range(int(offsets[b])):
                store.owner[slot, (int(base[slot]) + n) % NODES] = int(base[slot]) + n
        rf = store.begin(torch.tensor(REQUEST_SLOTS, device=device), offsets.to(device), parents.to(device),
                         chain=False)
        monkeypatch.setattr(module, "replays_paths", lambda rf, T, replay=replay: replay)
        out = run(rf)
        pos = store.ring(rf.slots, rf.nodes)
        results.append((out, store.scratch[(0, "s")][rf.slots[:, None].expand_as(pos), pos]))
    if DEVICE == "cpu":  # the interpreter runs both variants' arithmetic in the same order
        assert torch.equal(results[0][0], results[1][0])
        assert torch.equal(results[0][1], results[1][1])
    else:  # compiled, the two PATHS variants may contract multiply-adds differently
        close(results[0][0], results[1][0], torch.float32 if dtype == torch.float32 else dtype)
        close(results[0][1], results[1][1], torch.float32)


def test_replays_paths_only_for_trees_that_fit_the_ring():
    from specir.backends.triton.kernels.tree_paths import replays_paths
    rf = types.SimpleNamespace(chain=False, store=types.SimpleNamespace(nodes=8))
    assert replays_paths(rf, 8) and not replays_paths(rf, 9) and not replays_paths(rf, 1)
    assert not replays_paths(types.SimpleNamespace(chain=True, store=rf.store), 4)


def test_a_forward_whose_nodes_would_overwrite_its_start_node_is_refused():
    """W = 4, nodes 0 and 1 held: a forward of 4 new nodes (2..5) whose token continues from node 0
    would write node 4 into node 0's ring slot before (walk) or while (path replay) it is read."""
    from specir.errors import SpecirError
    store = RecurrentStates([StateSpec(0, "s", (2, 3), "f32")], 1, 4, torch.float32, "cpu")
    store.owner[0, :2] = torch.tensor([0, 1])
    with pytest.raises(SpecirError, match="its own nodes would overwrite"):
        store.begin(torch.tensor([0]), torch.tensor([2]), torch.tensor([[0, 2, 3, 2]]))
    with pytest.raises(SpecirError, match="its own nodes would overwrite"):  # node 5 takes node 1's slot
        store.begin(torch.tensor([0]), torch.tensor([2]), torch.tensor([[1, 2, 3, 2]]))
    store.begin(torch.tensor([0]), torch.tensor([2]), torch.tensor([[1, 2, 3]]))  # nodes 2..4: node 1's slot kept
