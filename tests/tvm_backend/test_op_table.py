"""Every op of the TVM kernel table against the reference backend's kernel, on fresh random inputs,
with the runtime's own ForwardState (cache slots, scratch offsets, [B, T, U] masks)."""
from __future__ import annotations

import pytest
import torch

from specir.backends.reference import ops as ref
from specir.rope import rotary_dim
from specir.runtime.kv_cache import KVCache
from specir.runtime.model_runner import RopeTable

from .forward_state import causal_mask, forward_state

DTYPES = [torch.bfloat16, torch.float32]


def assert_close(actual, expected, dtype):
    """fp32: 1e-5 of the largest magnitude (sums in another order); bf16: one rounding of it."""
    actual, expected = actual.float(), expected.float()
    scale = expected.abs().max().clamp_min(1e-30)
    tol = (2 ** -7 if dtype == torch.bfloat16 else 1e-5) * scale
    err = (actual - expected).abs().max()
    assert err <= tol, f"max abs error {err:.3e} > {tol:.3e}"


def plain_state(batch=1, T=1, max_seq=16):
    cache = KVCache({0: (1, 8)}, batch, max_seq, torch.float32, "cpu")
    positions = torch.arange(T)[None, :].expand(batch, T).contiguous()
    return forward_state(cache, list(range(batch)), positions, [0] * batch, causal_mask(T, [0] * batch))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens", [1, 5])
@pytest.mark.parametrize("bias", [False, True])
def test_linear(tvm_ops, fresh_seed, dtype, tokens, bias):
    x = torch.randn(2, tokens, 96).to(dtype)
    params = {"weight": (torch.randn(72, 96) * 0.1).to(dtype), "bias": torch.randn(72).to(dtype) if bias else None}
    out = tvm_ops["linear"](params, plain_state(), x)
    assert out.shape == (2, tokens, 72) and out.dtype == dtype
    exact = torch.nn.functional.linear(x.float(), params["weight"].float(), None if not bias else params["bias"].float())
    assert_close(out, exact, dtype)
    assert_close(out, ref.linear(params, plain_state(), x), dtype)


@pytest.mark.parametrize("tokens", [1, 3])
def test_packed_linear_has_the_bits_of_linear_on_the_unpacked_weight(tvm_ops, fresh_seed, tokens):
    from specir.bf12 import pack, unpack
    w = (torch.randn(40, 256) * 0.02).bfloat16()
    w[3, :130] = 0  # zeros (escapes) in one group
    packed = pack(w)
    assert torch.equal(unpack(packed), w)
    x = torch.randn(1, tokens, 256).bfloat16()
    out = tvm_ops["packed_linear"]({"weight": packed, "bias": None}, plain_state(), x)
    assert torch.equal(out, tvm_ops["linear"]({"weight": w, "bias": None}, plain_state(), x))
    assert_close(out, ref.packed_linear({"weight": packed}, plain_state(), x), torch.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("group", [0, 32])
def test_rms_norm(tvm_ops, fresh_seed, dtype, group):
    x = (torch.randn(2, 3, 128) * 3).to(dtype)
    params = {"weight": (1 + 0.1 * torch.randn(group or 128)).to(dtype), "eps": 1e-5, "group": group}
    assert_close(tvm_ops["rms_norm"](params, plain_state(), x), ref.rms_norm(params, plain_state(), x), dtype)


ROPES = {
    "llama3": {"type": "llama3", "theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64},
    "yarn": {"type": "yarn", "theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64},
    "partial": {"type": "default", "theta": 10000.0, "partial_rotary_factor": 0.5},
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", sorted(ROPES))
def test_rope(tvm_ops, fresh_seed, dtype, kind):
    head_dim, heads, B, T = 32, 3, 2, 4
    rope = ROPES[kind]
    positions = torch.randint(0, 300, (B, T))
    cache = KVCache({0: (1, 8)}, B, 512, torch.float32, "cpu")
    x = torch.randn(B, T, heads * head_dim).to(dtype)
    params = {"head_dim": head_dim, "table": RopeTable(rope, head_dim), "rotary_dim": rotary_dim(rope, head_dim)}
    if kind == "yarn":
        assert params["table"].attention_factor != 1.0
    out = tvm_ops["rope"](params, forward_state(cache, [0, 1], positions, [0, 0], causal_mask(T, [0, 0])), x, positions)
    expected = ref.rope(params, forward_state(cache, [0, 1], positions, [0, 0], causal_mask(T, [0, 0])), x, positions)
    # cos/sin: libm in TVM vs torch's vectorised ones, a few fp32 ulps apart before rounding
    assert_close(out, expected, dtype if dtype == torch.bfloat16 else torch.bfloat16)
    if kind == "partial":
        rows = x.view(B, T, heads, head_dim)
        assert torch.equal(out.view(B, T, heads, head_dim)[..., 16:], rows[..., 16:])


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu(tvm_ops, fresh_seed, dtype):
    gate, up = torch.randn(2, 3, 112).to(dtype) * 3, torch.randn(2, 3, 112).to(dtype)
    assert_close(tvm_ops["swiglu"]({}, plain_state(), gate, up), ref.swiglu({}, plain_state(), gate, up), dtype)


def _tree_mask(B, T, offsets, seed_mask=None):
    """Random trees over the scratch rows: node t sees itself, a random subset of the earlier
    scratch rows (columns < offsets[b]) and its ancestors among the new tokens."""
    U = max(offsets) + T
    mask = torch.zeros(B, T, U, dtype=torch.bool)
    for b in range(B):
        parent = [-1] + [int(torch.randint(0, t, ())) for t in range(1, T)]
        earlier = torch.rand(offsets[b]) < 0.5
        for t in range(T):
            mask[b, t, :offsets[b]] = earlier
            u = t
            while u >= 0:
                mask[b, t, offsets[b] + u] = True
                u = parent[u]
    return mask


ATTENTION_CASES = {
    # name: (B, T, slots, committed lens per slot, offsets, tree?)
    "prefill": (1, 7, [0], [0, 0], [0], False),
    "decode_ragged_slots": (2, 1, [1, 0], [5, 9], [0, 0], False),
    "chain_draft_scratch": (2, 1, [0, 1], [4, 6], [2, 3], False),
    "verify_chain": (2, 5, [1, 0], [3, 8], [0, 0], False),
    "tree_verify": (2, 6, [0, 1], [7, 2], [0, 0], True),
    "tree_level_scratch": (2, 3, [1, 0], [4, 5], [2, 4], True),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
@pytest.mark.parametrize("window", [0, 3])
def test_attention(tvm_ops, fresh_seed, dtype, case, window):
    B, T, slots, lens, offsets, tree = ATTENTION_CASES[case]
    heads, kv_heads, head_dim, max_seq = 4, 2, 16, 24
    caches = []
    for _ in range(2):
        cache = KVCache({3: (kv_heads, head_dim)}, 2, max_seq, dtype, "cpu")
        caches.append(cache)
    torch.manual_seed(torch.initial_seed() + 1)
    for name in ("k", "v"):
        filled = torch.randn(2, kv_heads, max_seq, head_dim).to(dtype)
        getattr(caches[0], name)[3].copy_(filled)
        getattr(caches[1], name)[3].copy_(filled)
    for cache in caches:
        cache.lens = list(lens)
    positions = torch.stack([torch.arange(T) + lens[s] + o for s, o in zip(slots, offsets)])
    mask = _tree_mask(B, T, offsets) if tree else causal_mask(T, offsets)
    q = torch.randn(B, T, heads * head_dim).to(dtype)
    k = torch.randn(B, T, kv_heads * head_dim).to(dtype)
    v = torch.randn(B, T, kv_heads * head_dim).to(dtype)
    params = {"layer": 3, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "scale": 0.0, "window": window}
    out = tvm_ops["attention"](params, forward_state(caches[0], slots, positions, offsets, mask), q, k, v, mask)
    expected = ref.attention(params, forward_state(caches[1], slots, positions, offsets, mask), q, k, v, mask)
    assert torch.equal(caches[0].k[3], caches[1].k[3]) and torch.equal(caches[0].v[3], caches[1].v[3])
    if window:  # sliding windows run the reference kernel
        assert torch.equal(out, expected)
    else:
        assert_close(out, expected, dtype)


def test_f16_activations_run_the_reference_kernels(tvm_ops):
    x = torch.randn(1, 2, 64).half()
    params = {"weight": torch.randn(16, 64).half(), "bias": None}
    assert torch.equal(tvm_ops["linear"](params, plain_state(), x), ref.linear(params, plain_state(), x))
