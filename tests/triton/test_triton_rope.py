import pytest
import torch

from specir import kernel_reference as ref
from specir.backends.triton.kernels.rope import rope, rope_kv_write


def _inv_freq(d, base=500000.0):
    return 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
# 12 and 20 q heads: a token's q heads over several programs (Q_HEADS_PER_PROGRAM), the last group partial
@pytest.mark.parametrize("heads,kv_heads,d,rotary", [(4, 4, 16, 16), (8, 2, 24, 24), (4, 2, 32, 8), (12, 4, 16, 16),
                                                     (20, 4, 32, 16)])
@pytest.mark.parametrize("split_heads", [True, False], ids=["split", "token"])
def test_rope_out_of_place(seed, device, kt, dtype, heads, kv_heads, d, rotary, split_heads):
    n = 7
    q = torch.randn(n, heads, d).to(dtype).to(device)
    k = torch.randn(n, kv_heads, d).to(dtype).to(device)
    pos = torch.randint(0, 6000, (n,), device=device)       # arbitrary, not contiguous
    inv_freq = _inv_freq(rotary).to(device)
    q_out, k_out = kt.poisoned(q.shape, dtype, device), kt.poisoned(k.shape, dtype, device)
    rope(q, k, pos, inv_freq, 0.9, q_out=q_out, k_out=k_out, split_heads=split_heads)
    want_q, want_k = ref.rope_reference(q, k, pos, inv_freq, 0.9)
    kt.close(q_out, want_q)
    kt.close(k_out, want_k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rotary", [16, 8])
@pytest.mark.parametrize("H", [4, 12])
@pytest.mark.parametrize("split_heads", [True, False], ids=["split", "token"])
def test_rope_in_place_on_fused_qkv_views(seed, device, kt, dtype, rotary, H, split_heads):
    B, T, KH, D = 2, 3, 2, 16
    qkv = torch.randn(B, T, (H + 2 * KH) * D).to(dtype).to(device)
    q = qkv[..., : H * D].view(B, T, H, D)
    k = qkv[..., H * D: (H + KH) * D].view(B, T, KH, D)
    v_before = qkv[..., (H + KH) * D:].clone()
    pos = torch.randint(0, 100, (B, T), device=device)
    inv_freq = _inv_freq(rotary).to(device)
    want_q, want_k = ref.rope_reference(q.reshape(-1, H, D), k.reshape(-1, KH, D), pos, inv_freq)
    rope(q, k, pos, inv_freq, inplace=True, split_heads=split_heads)
    kt.close(q.reshape(-1, H, D), want_q)
    kt.close(k.reshape(-1, KH, D), want_k)
    assert torch.equal(qkv[..., (H + KH) * D:], v_before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("slots_offsets_partial", [False, True])
@pytest.mark.parametrize("H", [8, 20])
@pytest.mark.parametrize("split_heads", [True, False], ids=["split", "token"])
def test_rope_kv_write(seed, device, kt, dtype, slots_offsets_partial, H, split_heads):
    B, T, KH, D, S = 3, 4, 2, 16, 12
    q = torch.randn(B, T, H, D).to(dtype).to(device)
    k = torch.randn(B, T, KH, D).to(dtype).to(device)
    v = torch.randn(B, T, KH, D).to(dtype).to(device)
    lens = torch.tensor([0, 5, 10], dtype=torch.int32, device=device)    # request 2 overflows S
    pos = lens[:, None].long() + torch.randint(0, 3, (B, T), device=device)
    slots = offsets = None
    inv_freq = _inv_freq(D).to(device)
    if slots_offsets_partial:
        slots = torch.tensor([3, 0, 1], dtype=torch.int32, device=device)     # cache rows of the requests
        offsets = torch.tensor([2, 0, 1], dtype=torch.int32, device=device)   # scratch rows already used
        inv_freq = _inv_freq(D // 2).to(device)                               # partial rotary
    k_cache = kt.poisoned((4, KH, S, D), dtype, device)
    v_cache = kt.poisoned((4, KH, S, D), dtype, device)
    want_k_cache, want_v_cache = k_cache.clone(), v_cache.clone()
    want_q, want_k = ref.rope_reference(q.reshape(-1, H, D), k.reshape(-1, KH, D), pos, inv_freq)
    ref.kv_write_reference(want_k_cache, want_v_cache, want_k.view(B, T, KH, D), v, lens, slots=slots, offsets=offsets)
    q_out = kt.poisoned(q.shape, dtype, device)
    rope_kv_write(q, k, v, pos, inv_freq, k_cache, v_cache, lens, q_out=q_out, slots=slots, offsets=offsets,
                  split_heads=split_heads)
    kt.close(q_out.view(-1, H, D), want_q)
    written = ~torch.isnan(want_k_cache)
    assert torch.equal(written, ~torch.isnan(k_cache)) and torch.equal(written, ~torch.isnan(v_cache))
    kt.close(k_cache[written], want_k_cache[written], dtype)
    assert torch.equal(v_cache[written], want_v_cache[written])


def test_rope_kv_write_skips_pad_rows(seed, device, kt):
    """A packed forward's pad rows (tokens >= n_rows[0]) write no KV, even where they repeat a real
    row's cache row with other values; their q is still rotated."""
    P, H, KH, D, S = 5, 4, 2, 16, 12
    q, k, v = (torch.randn(P, 1, n, D, device=device) for n in (H, KH, KH))
    lens = torch.full((P,), 3, dtype=torch.int32, device=device)
    slots = torch.tensor([1, 1, 0, 1, 1], dtype=torch.int32, device=device)
    offsets = torch.tensor([0, 1, 0, 0, 0], dtype=torch.int32, device=device)  # rows 3, 4: pad rows (row 0's row)
    n_rows = torch.tensor([3], dtype=torch.int32, device=device)
    pos = (lens.long() + offsets.long())[:, None]
    inv_freq = _inv_freq(D).to(device)
    k_cache = kt.poisoned((2, KH, S, D), torch.float32, device)
    v_cache = kt.poisoned((2, KH, S, D), torch.float32, device)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    want_q, rotated = ref.rope_reference(q.reshape(-1, H, D), k.reshape(-1, KH, D), pos, inv_freq)
    ref.kv_write_reference(want_k, want_v, rotated[:3].view(3, 1, KH, D), v[:3], lens[:3], slots=slots[:3],
                           offsets=offsets[:3])
    q_out = rope_kv_write(q, k, v, pos, inv_freq, k_cache, v_cache, lens, slots=slots, offsets=offsets, n_rows=n_rows)
    kt.close(q_out.view(-1, H, D), want_q)
    assert torch.equal(k_cache.isnan(), want_k.isnan()) and torch.equal(v_cache.isnan(), want_v.isnan())
    kt.close(k_cache.nan_to_num(), want_k.nan_to_num())
    assert torch.equal(v_cache.nan_to_num(), want_v.nan_to_num())
