"""Launch overlap (kernels/launch_overlap.py): linear launches that start while the launch before
them drains give the bits of plain launches. A chain of dependent linears (RMSNorm prologue,
residual epilogue, SwiGLU prologue, split-K, BF12 with raw rows) runs overlapped and plain, eagerly
and replayed from a CUDA graph (where the launches' programmatic edges are captured): every output
bit equal. Each launch reads what the one before it wrote, so a program that read before its wait
would see stale values.

On a GPU of sm_90 or later the overlapped launches ask for `launch_pdl`; elsewhere (and in Triton's
CPU interpreter) `overlap` runs the plain kernels, which the chain still checks.
"""
import pytest
import torch

from specir.backends.triton.kernels.launch_overlap import overlap_available
from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
from specir.backends.triton.kernels.linear_config import LinearConfig
from specir.bf12 import pack
from tests.triton.test_linear import as_bits, weights
from tests.triton.test_linear_norm_residual import EPS, hidden, norm_weight

GPU = torch.cuda.is_available()
HIDDEN, INTER = (1024, 2816) if GPU else (256, 320)   # K of the down projection: full groups and a ragged tail
LAYERS = 3 if GPU else 1


def _layer_weights(device, seed):
    torch.manual_seed(seed)
    qkv, o = weights(3 * HIDDEN // 2, HIDDEN, device), weights(HIDDEN, HIDDEN // 2, device)
    gate_up, down = weights(2 * INTER, HIDDEN, device), weights(HIDDEN, INTER, device)
    norms = norm_weight(HIDDEN, device), norm_weight(HIDDEN, device)
    return qkv, o, gate_up, down, norms


def _chain(h, layers, overlap, packed, configs):
    """A decoder-layer-shaped chain of linears, each reading what the one before it wrote."""
    for *mats, (n1, n2) in layers:
        linear = linear_bf12 if packed else linear_bf16
        y = linear(h, mats[0], norm=(n1, EPS), overlap=overlap, config=configs.get("qkv"))
        h = linear(y[:, : HIDDEN // 2], mats[1], residual=h, overlap=overlap, config=configs.get("o"))
        gu = linear(h, mats[2], norm=(n2, EPS), overlap=overlap)
        h = linear(gu[:, :INTER], mats[3], up=gu[:, INTER:], residual=h, overlap=overlap)
    return h


@pytest.mark.parametrize("packed", [False, True], ids=["bf16", "bf12"])
def test_overlapped_chain_bits_equal_the_plain_chain(seed, device, packed):
    layers = [_layer_weights(device, seed + i) for i in range(LAYERS)]
    if packed:  # packed before the chain runs: packing inside a CUDA-graph capture is not allowed
        layers = [(*(pack(w).to(device) for w in layer[:4]), layer[4]) for layer in layers]
    h0 = hidden(1, HIDDEN, device)
    # split-K on the qkv launch (its programs wait on the arrival counter after the wait), one split on o
    configs = {"qkv": LinearConfig("gemv", 32, 1, 4, overlap_iters=8), "o": LinearConfig("gemv", 64, 1, 1)}
    plain = _chain(h0, layers, False, packed, configs)
    assert torch.equal(as_bits(_chain(h0, layers, True, packed, configs)), as_bits(plain))
    if not GPU:
        return
    static_h = h0.clone()
    _chain(static_h, layers, True, packed, configs)  # compile and warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _chain(static_h, layers, True, packed, configs)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(as_bits(out), as_bits(plain))
    static_h.copy_(hidden(1, HIDDEN, device))  # new inputs: the replay reads them, not stale values
    expected = _chain(static_h, layers, False, packed, configs)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(as_bits(out), as_bits(expected))


def test_overlap_is_offered_only_on_a_compiled_sm90_device(device):
    expected = GPU and torch.cuda.get_device_capability(device)[0] >= 9
    assert overlap_available(torch.device(device)) == expected
    assert not overlap_available(torch.device("cpu"))
