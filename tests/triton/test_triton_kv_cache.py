import pytest
import torch

from specir import kernel_reference as ref
from specir.backends.triton.kernels.kv_cache import kv_compact, kv_write


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_n_new", [False, True])
@pytest.mark.parametrize("slots_offsets", [False, True])
def test_kv_write_ragged(seed, device, kt, dtype, with_n_new, slots_offsets):
    B, T, KH, D, S = 3, 4, 2, 24, 10
    k_new = torch.randn(B, T, KH, D).to(dtype).to(device)
    v_new = torch.randn(B, T, KH, D).to(dtype).to(device)
    lens = torch.tensor([0, 3, 8], dtype=torch.int32, device=device)   # request 2 runs past S
    n_new = torch.tensor([4, 1, 2], dtype=torch.int32, device=device) if with_n_new else None
    slots = torch.tensor([2, 3, 0], dtype=torch.int32, device=device) if slots_offsets else None
    offsets = torch.tensor([1, 0, 2], dtype=torch.int32, device=device) if slots_offsets else None
    k_cache, v_cache = kt.poisoned((4, KH, S, D), dtype, device), kt.poisoned((4, KH, S, D), dtype, device)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    ref.kv_write_reference(want_k, want_v, k_new, v_new, lens, n_new, slots, offsets)
    kv_write(k_cache, v_cache, k_new, v_new, lens, n_new, slots=slots, offsets=offsets)
    # NaN marks untouched slots: equal_nan checks both the values and that nothing else was written
    assert torch.equal(k_cache.isnan(), want_k.isnan()) and torch.equal(v_cache.isnan(), want_v.isnan())
    assert torch.equal(k_cache.nan_to_num(), want_k.nan_to_num())
    assert torch.equal(v_cache.nan_to_num(), want_v.nan_to_num())


def _random_acceptance(B, T, device):
    """Ascending accepted node indices starting at 0, a random count per request."""
    acc_idx = torch.full((B, T), -1, dtype=torch.int32)
    n_acc = torch.zeros(B, dtype=torch.int32)
    for b in range(B):
        count = int(torch.randint(1, T + 1, ()))
        chosen = torch.cat([torch.zeros(1, dtype=torch.long), torch.randperm(T - 1)[: count - 1] + 1]).sort().values
        acc_idx[b, :count] = chosen.to(torch.int32)
        n_acc[b] = count
    return acc_idx.to(device), n_acc.to(device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_slots", [False, True])
def test_kv_compact(seed, device, kt, dtype, with_slots):
    B, T, KH, D, S = 4, 6, 2, 16, 20
    k_cache = torch.randn(B + 1, KH, S, D).to(dtype).to(device)
    v_cache = torch.randn(B + 1, KH, S, D).to(dtype).to(device)
    lens = torch.randint(0, S - T + 1, (B,), dtype=torch.int32, device=device)
    slots = torch.randperm(B + 1)[:B].to(torch.int32).to(device) if with_slots else None
    acc_idx, n_acc = _random_acceptance(B, T, device)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    want_lens = ref.kv_compact_reference(want_k, want_v, lens, acc_idx, n_acc, slots)
    new_lens = kt.poisoned((B,), torch.int32, device)
    kv_compact(k_cache, v_cache, lens, acc_idx, n_acc, new_lens_out=new_lens, slots=slots)
    assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)
    assert torch.equal(new_lens, want_lens)


@pytest.mark.parametrize("with_slots", [False, True])
def test_kv_compact_moves_every_stacked_layer_in_one_call(seed, device, kt, with_slots):
    """[layers, slots, KH, S, D] (KVCache.stacks): each layer as if compacted on its own; the new
    lens written once."""
    L, B, T, KH, D, S = 3, 4, 6, 2, 16, 20
    k_stack, v_stack = torch.randn(L, B + 1, KH, S, D, device=device), torch.randn(L, B + 1, KH, S, D, device=device)
    lens = torch.randint(0, S - T + 1, (B,), dtype=torch.int32, device=device)
    slots = torch.randperm(B + 1)[:B].to(torch.int32).to(device) if with_slots else None
    acc_idx, n_acc = _random_acceptance(B, T, device)
    want_k, want_v = k_stack.clone(), v_stack.clone()
    for layer in range(L):
        want_lens = ref.kv_compact_reference(want_k[layer], want_v[layer], lens, acc_idx, n_acc, slots)
    new_lens = kt.poisoned((B,), torch.int32, device)
    kv_compact(k_stack, v_stack, lens, acc_idx, n_acc, new_lens_out=new_lens, slots=slots)
    assert torch.equal(k_stack, want_k) and torch.equal(v_stack, want_v)
    assert torch.equal(new_lens, want_lens)


def test_a_kv_cache_stacks_its_layers_by_shape():
    from specir.runtime.kv_cache import KVCache
    cache = KVCache({0: (2, 8), 1: (4, 16), 2: (2, 8), 5: (2, 8)}, 3, 10, torch.float32, "cpu")
    assert list(cache.k) == [0, 1, 2, 5] and [k.shape for k, _ in cache.stacks] == [(3, 3, 2, 10, 8), (1, 3, 4, 10, 16)]
    k, v = cache.stacks[0]
    cache.layer(2)[0].fill_(1.0)
    assert k[1].eq(1.0).all() and k[[0, 2]].eq(0).all() and cache.k[5].data_ptr() == k[2].data_ptr()
    assert cache.layer(2)[0].shape == (3, 2, 10, 8) and cache.layer(2)[0].is_contiguous()


def test_kv_compact_chain_moves_nothing(seed, device):
    B, T, KH, D, S = 2, 5, 4, 8, 12
    k_cache, v_cache = torch.randn(B, KH, S, D, device=device), torch.randn(B, KH, S, D, device=device)
    before = k_cache.clone(), v_cache.clone()
    lens = torch.tensor([2, 7], dtype=torch.int32, device=device)
    acc_idx = torch.arange(T, dtype=torch.int32, device=device).repeat(B, 1)
    kv_compact(k_cache, v_cache, lens, acc_idx, torch.tensor([5, 3], dtype=torch.int32, device=device))
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1])


def test_kv_write_skips_pad_rows(seed, device):
    """With n_rows (a packed forward's real rows), tokens past it write nothing: a pad row that
    repeats row 0's cache row with other values leaves row 0's KV as row 0 wrote it."""
    P, KH, D, S = 4, 2, 16, 8
    k_new, v_new = torch.randn(P, 1, KH, D, device=device), torch.randn(P, 1, KH, D, device=device)
    lens = torch.tensor([2, 2, 5, 2], dtype=torch.int32, device=device)
    slots = torch.tensor([1, 1, 0, 1], dtype=torch.int32, device=device)
    offsets = torch.tensor([0, 1, 0, 0], dtype=torch.int32, device=device)   # row 3: a pad row (row 0's row)
    k_cache, v_cache = torch.zeros(2, KH, S, D, device=device), torch.zeros(2, KH, S, D, device=device)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    ref.kv_write_reference(want_k, want_v, k_new[:3], v_new[:3], lens[:3], slots=slots[:3], offsets=offsets[:3])
    kv_write(k_cache, v_cache, k_new, v_new, lens, slots=slots, offsets=offsets,
             n_rows=torch.tensor([3], dtype=torch.int32, device=device))
    assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)
