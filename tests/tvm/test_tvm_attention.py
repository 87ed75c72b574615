"""Attention over the KV cache (ragged lens, chains, trees, GQA) and the torch KV-cache ops."""

import pytest
import torch

from specir.backends.tvm.reference import attention_reference, kv_compact_reference, kv_write_reference


def _tree_mask(batch, n_new):
    """Random trees: parent[t] < t; node t sees itself and its ancestors."""
    mask = torch.zeros(batch, n_new, n_new, dtype=torch.bool)
    for b in range(batch):
        parent = [-1] + [int(torch.randint(0, t, ())) for t in range(1, n_new)]
        for t in range(n_new):
            u = t
            while u >= 0:
                mask[b, t, u] = True
                u = parent[u]
    return mask


def _case(batch, n_new, heads, kv_heads, head_dim=64, max_seq=48, dtype=torch.float32):
    q = torch.randn(batch, n_new, heads, head_dim).to(dtype)
    k_cache = torch.randn(batch, kv_heads, max_seq, head_dim).to(dtype)
    v_cache = torch.randn(batch, kv_heads, max_seq, head_dim).to(dtype)
    lens = torch.randint(0, max_seq - n_new + 1, (batch,), dtype=torch.int32)
    lens[0] = 0  # an empty context: only the new tokens are visible
    return q, k_cache, v_cache, lens


@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("n_new", [1, 4])
def test_chain_attention_ragged_gqa(kernels, group, n_new):
    q, k_cache, v_cache, lens = _case(3, n_new, 4 * group, 4)
    out = kernels.attention(q, k_cache, v_cache, lens)
    torch.testing.assert_close(out, attention_reference(q, k_cache, v_cache, lens), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("group", [1, 4])
def test_tree_attention(kernels, group):
    q, k_cache, v_cache, lens = _case(3, 9, 2 * group, 2)
    mask = _tree_mask(3, 9)
    out = kernels.attention(q, k_cache, v_cache, lens, mask)
    torch.testing.assert_close(out, attention_reference(q, k_cache, v_cache, lens, mask), rtol=1e-5, atol=1e-5)


def test_tree_attention_bf16_and_scale(kernels):
    q, k_cache, v_cache, lens = _case(2, 6, 8, 2, dtype=torch.bfloat16)
    mask = _tree_mask(2, 6)
    out = kernels.attention(q, k_cache, v_cache, lens, mask, scale=0.2)
    ref = attention_reference(q, k_cache, v_cache, lens, mask, scale=0.2)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref.float(), rtol=2**-7, atol=1e-5)


def test_slots_past_the_new_tokens_are_never_read(kernels):
    """NaN in every slot past lens + T leaves the output finite and unchanged (a tree that
    hides most new nodes from each other)."""
    q, k_cache, v_cache, lens = _case(2, 5, 8, 2)
    mask = torch.eye(5, dtype=torch.bool).expand(2, 5, 5).clone()
    mask[:, :, 0] = True  # every node sees node 0 and itself; nodes 1..4 are hidden from others
    clean_out = kernels.attention(q, k_cache, v_cache, lens, mask)
    for b in range(2):
        k_cache[b, :, int(lens[b]) + 5:] = float("nan")
        v_cache[b, :, int(lens[b]) + 5:] = float("nan")
    out = kernels.attention(q, k_cache, v_cache, lens, mask)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, clean_out, rtol=0, atol=0)


def test_kv_write_then_compact_matches_reference(kernels):
    batch, n_new, kv_heads, d, max_seq = 3, 5, 2, 16, 24
    lens = torch.tensor([0, 4, 10], dtype=torch.int32)
    k_cache, v_cache = torch.randn(batch, kv_heads, max_seq, d), torch.randn(batch, kv_heads, max_seq, d)
    k_new, v_new = torch.randn(batch, n_new, kv_heads, d), torch.randn(batch, n_new, kv_heads, d)
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    kernels.kv_write(k_cache, v_cache, k_new, v_new, lens)
    kv_write_reference(ref_k, ref_v, k_new, v_new, lens)
    assert torch.equal(k_cache, ref_k) and torch.equal(v_cache, ref_v)
    acc_idx = torch.tensor([[0, 1, 2, -1, -1], [0, 2, 4, -1, -1], [0, -1, -1, -1, -1]], dtype=torch.int32)
    n_acc = torch.tensor([3, 3, 1], dtype=torch.int32)
    new_lens = kernels.kv_compact(k_cache, v_cache, lens, acc_idx, n_acc)
    ref_lens = kv_compact_reference(ref_k, ref_v, lens, acc_idx, n_acc)
    assert torch.equal(new_lens, ref_lens) and torch.equal(k_cache, ref_k) and torch.equal(v_cache, ref_v)


def test_context_overflow_is_an_error(kernels):
    q, k_cache, v_cache, lens = _case(1, 4, 4, 4, max_seq=8)
    lens[0] = 5
    with pytest.raises(ValueError, match="max_seq"):
        kernels.attention(q, k_cache, v_cache, lens)


def test_kv_write_valid_tokens_only(kernels):
    """With n_new, token t of request b is written only when t < n_new[b]; slots past max_seq
    are dropped."""
    k_cache, v_cache = torch.zeros(3, 2, 8, 4), torch.zeros(3, 2, 8, 4)
    k_new, v_new = torch.randn(3, 4, 2, 4), torch.randn(3, 4, 2, 4)
    lens = torch.tensor([0, 2, 6], dtype=torch.int32)
    n_new = torch.tensor([2, 4, 4], dtype=torch.int32)
    kernels.kv_write(k_cache, v_cache, k_new, v_new, lens, n_new)
    assert torch.equal(k_cache[0, :, :2], k_new[0, :2].transpose(0, 1)) and not k_cache[0, :, 2:].any()
    assert torch.equal(v_cache[1, :, 2:6], v_new[1].transpose(0, 1))
    assert torch.equal(k_cache[2, :, 6:8], k_new[2, :2].transpose(0, 1))  # tokens 2, 3 fall off
