import pytest
import torch

from specir import kernel_reference as ref
from specir.backends.triton.kernels.attention import attention, attention_workspace


def random_tree_mask(B, T):
    """Ancestor-or-self masks of random trees (parent[t] < t), so nodes branch."""
    mask = torch.zeros(B, T, T, dtype=torch.bool)
    for b in range(B):
        for t in range(T):
            mask[b, t, t] = True
            if t:
                parent = int(torch.randint(0, t, ()))
                mask[b, t] |= mask[b, parent]
    return mask


def _inputs(B, T, H, KH, D, S, lens, dtype, device):
    q = torch.randn(B, T, H, D).to(dtype).to(device)
    k_cache = torch.randn(B, KH, S, D).to(dtype).to(device)
    v_cache = torch.randn(B, KH, S, D).to(dtype).to(device)
    lens = torch.tensor(lens, dtype=torch.int32, device=device)
    return q, k_cache, v_cache, lens


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kv_heads", [4, 1])          # GQA ratio 1 and 4 (H = 4)
@pytest.mark.parametrize("num_splits", [1, 3])
def test_decode(seed, device, kt, dtype, kv_heads, num_splits):
    B, T, H, D, S = 3, 1, 4, 16, 80
    q, k_cache, v_cache, lens = _inputs(B, T, H, kv_heads, D, S, [0, 37, 70], dtype, device)
    out = kt.poisoned(q.shape, dtype, device)
    attention(q, k_cache, v_cache, lens, out=out, num_splits=num_splits, block_n=16, min_chunk=16)
    kt.close(out, ref.attention_reference(q, k_cache, v_cache, lens))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kv_heads", [4, 1])
@pytest.mark.parametrize("use_tree", [False, True])
def test_verify(seed, device, kt, dtype, kv_heads, use_tree):
    B, T, H, D, S = 2, 9, 4, 16, 64
    q, k_cache, v_cache, lens = _inputs(B, T, H, kv_heads, D, S, [21, 3], dtype, device)
    tree = random_tree_mask(B, T).to(device) if use_tree else None
    out = kt.poisoned(q.shape, dtype, device)
    attention(q, k_cache, v_cache, lens, tree, out=out, num_splits=2, block_n=16, min_chunk=16)
    kt.close(out, ref.attention_reference(q, k_cache, v_cache, lens, tree))


def test_verify_single_split_non_power_of_two_head_dim(seed, device, kt):
    B, T, H, KH, D, S = 2, 4, 8, 2, 24, 32
    q, k_cache, v_cache, lens = _inputs(B, T, H, KH, D, S, [17, 0], torch.float32, device)
    tree = random_tree_mask(B, T).to(device)
    out = kt.poisoned(q.shape, torch.float32, device)
    attention(q, k_cache, v_cache, lens, tree, scale=0.3, out=out, num_splits=1, block_n=16)
    kt.close(out, ref.attention_reference(q, k_cache, v_cache, lens, tree, scale=0.3))


def test_default_config_and_workspace(seed, device, kt):
    B, T, H, KH, D, S = 2, 3, 4, 2, 32, 48
    q, k_cache, v_cache, lens = _inputs(B, T, H, KH, D, S, [40, 9], torch.bfloat16, device)
    workspace = attention_workspace(B, T, H, D, 64, device)
    kt.close(attention(q, k_cache, v_cache, lens, workspace=workspace), ref.attention_reference(q, k_cache, v_cache, lens))


def test_masked_new_slots_do_not_leak(seed, device, kt):
    """A node must not see its siblings: changing a sibling's k/v leaves its output unchanged."""
    B, T, H, KH, D, S = 1, 3, 4, 2, 16, 16
    q, k_cache, v_cache, lens = _inputs(B, T, H, KH, D, S, [5], torch.float32, device)
    tree = torch.tensor([[[1, 0, 0], [1, 1, 0], [1, 0, 1]]], dtype=torch.bool, device=device)  # 1, 2 siblings
    first = attention(q, k_cache, v_cache, lens, tree, num_splits=2, block_n=16, min_chunk=16)
    k_cache[0, :, 5 + 2] += 3.0
    v_cache[0, :, 5 + 2] -= 3.0
    second = attention(q, k_cache, v_cache, lens, tree, num_splits=2, block_n=16, min_chunk=16)
    assert torch.equal(first[0, :2], second[0, :2])
    assert not torch.equal(first[0, 2], second[0, 2])


@pytest.mark.parametrize("use_tree", [False, True])
def test_slots_and_scratch_offsets(seed, device, kt, use_tree):
    """Requests in permuted cache slots, with scratch rows from earlier forwards before the new
    tokens (offsets) and a mask wider than T, as the runtime's catch-up drafting uses."""
    B, T, H, KH, D, S = 3, 4, 4, 2, 16, 48
    q, k_cache, v_cache, _ = _inputs(B, T, H, KH, D, S, [0], torch.bfloat16, device)
    k_cache = torch.randn(4, KH, S, D).to(torch.bfloat16).to(device)
    v_cache = torch.randn(4, KH, S, D).to(torch.bfloat16).to(device)
    lens = torch.tensor([9, 0, 30], dtype=torch.int32, device=device)
    slots = torch.tensor([2, 0, 3], dtype=torch.int32, device=device)
    offsets = torch.tensor([3, 0, 1], dtype=torch.int32, device=device)
    U = 3 + T
    tree = (torch.rand(B, T, U) < 0.5).to(device) if use_tree else None
    out = kt.poisoned(q.shape, torch.bfloat16, device)
    attention(q, k_cache, v_cache, lens, tree, out=out, slots=slots, offsets=offsets, num_splits=2, block_n=16, min_chunk=16)
    kt.close(out, ref.attention_reference(q, k_cache, v_cache, lens, tree, slots=slots, offsets=offsets))


@pytest.mark.parametrize("use_tree", [False, True])
def test_many_splits_merged_in_blocks_leave_counters_zeroed(seed, device, kt, use_tree):
    """Up to 16 active splits merged by the last one to arrive, in tiles smaller than its rows
    and splits (several merge steps); idle splits (past a request's length) do nothing; the
    arrival counters are zero again afterwards, so the next launch (another layer) can reuse them."""
    from specir.backends.triton.kernels.attention import counter_buffer
    B, T, H, KH, D, S = 3, 3, 8, 2, 32, 300
    q, k_cache, v_cache, lens = _inputs(B, T, H, KH, D, S, [250, 5, 120], torch.bfloat16, device)
    tree = random_tree_mask(B, T).to(device) if use_tree else None
    expected = ref.attention_reference(q, k_cache, v_cache, lens, tree)
    for merge in ({}, {"merge_rows": 2, "merge_splits": 4}):
        out = kt.poisoned(q.shape, torch.bfloat16, device)
        attention(q, k_cache, v_cache, lens, tree, out=out, num_splits=16, block_n=16, min_chunk=16, **merge)
        kt.close(out, expected)
        assert int(counter_buffer(device, 1)[:64].abs().sum()) == 0


def test_single_pass_when_one_chunk_covers_the_context(seed, device, kt):
    """A grid with many splits but a context shorter than one chunk: split 0 writes the output."""
    B, T, H, KH, D, S = 2, 1, 4, 1, 16, 512
    q, k_cache, v_cache, lens = _inputs(B, T, H, KH, D, S, [10, 40], torch.float32, device)
    out = kt.poisoned(q.shape, torch.float32, device)
    attention(q, k_cache, v_cache, lens, out=out, num_splits=8, block_n=64, min_chunk=64)
    kt.close(out, ref.attention_reference(q, k_cache, v_cache, lens))


@pytest.mark.parametrize("use_tree", [False, True])
@pytest.mark.parametrize("num_splits", [1, 4])
@pytest.mark.parametrize("window", [12, 33])
def test_sliding_window(seed, device, kt, use_tree, num_splits, window):
    """A sliding window (Mistral, Qwen2, the two-level window mid level): committed row r is seen
    by a query at position p only where p - r < window; skipped and masked blocks, splits, trees."""
    B, T, H, KH, D, S = 3, 5, 4, 2, 16, 96
    lens = [0, 30, 70]
    q, k_cache, v_cache, lens_t = _inputs(B, T, H, KH, D, S, lens, torch.float32, device)
    tree = random_tree_mask(B, T).to(device) if use_tree else None
    depth = tree.sum(-1) - 1 if use_tree else torch.arange(T)[None].expand(B, T)
    pos = (lens_t.long().cpu()[:, None] + depth.cpu()).to(device).contiguous()
    out = kt.poisoned(q.shape, torch.float32, device)
    attention(q, k_cache, v_cache, lens_t, tree, out=out, num_splits=num_splits, block_n=16, min_chunk=16,
              pos=pos, window=window)
    want = ref.attention_reference(q, k_cache, v_cache, lens_t, tree, pos=pos, window=window)
    kt.close(out, want)
    unwindowed = ref.attention_reference(q, k_cache, v_cache, lens_t, tree)
    assert not torch.allclose(want[2], unwindowed[2]), "the window must hide rows at context 70"


def test_window_shorter_than_the_new_tokens_of_a_prefill(seed, device, kt):
    """A prefill (causal, no tree) longer than the window: the new rows are windowed too."""
    B, T, H, KH, D, S = 2, 20, 4, 1, 16, 64
    q, k_cache, v_cache, lens = _inputs(B, T, H, KH, D, S, [0, 9], torch.float32, device)
    pos = (lens.long()[:, None] + torch.arange(T, device=device)[None]).contiguous()
    out = kt.poisoned(q.shape, torch.float32, device)
    attention(q, k_cache, v_cache, lens, out=out, num_splits=2, block_n=16, min_chunk=16, pos=pos, window=6)
    kt.close(out, ref.attention_reference(q, k_cache, v_cache, lens, pos=pos, window=6))


def test_window_needs_positions_and_a_tree_within_it(seed, device):
    q, k_cache, v_cache, lens = _inputs(1, 4, 4, 2, 16, 32, [8], torch.float32, device)
    with pytest.raises(ValueError, match="window"):
        attention(q, k_cache, v_cache, lens, window=16)
    pos = torch.arange(8, 12, device=device)[None]
    with pytest.raises(ValueError, match="exceed"):
        attention(q, k_cache, v_cache, lens, random_tree_mask(1, 4).to(device), pos=pos, window=4)


def test_the_batch_axis_of_the_grid_is_the_one_without_the_65535_limit():
    """A packed verify's forward has one request row per token: 64 requests of 65 nodes prime an
    8192-row bucket, 65536 (request, kv head) programs, over CUDA's limit on grid axes 1 and 2 (the
    H200 run of 2026-12-01 failed there with 'invalid argument')."""
    from specir.backends.triton.kernels.attention import attention_config, attention_grid
    cfg = attention_config(8192, 1, 32, 8, 128, 512, sm=132)
    grid = attention_grid(cfg)
    assert grid[0] == 8192 * 8 and max(grid[1:]) <= 65535


def test_many_requests_of_one_token(seed, device, kt):
    """More (request, kv head) programs than one grid axis 1 could hold on CUDA, on the device
    (the interpreter runs a smaller batch: it has no grid limit and runs programs one by one)."""
    B = 8200 if device == "cuda" else 40
    q, k_cache, v_cache, lens = _inputs(B, 1, 16, 8, 16, 24, [5 + b % 17 for b in range(B)], torch.float32, device)
    out = attention(q, k_cache, v_cache, lens)
    kt.close(out, ref.attention_reference(q, k_cache, v_cache, lens))


def _packed_batch(counts, N, pad, H, KH, D, S, dtype, device):
    """A packed forward's attention inputs: request r (cache slot slots_of[r], lens_of[r]) owns
    counts[r] rows, its valid nodes (a random ascending subset of a random N-node tree), rows
    request-major; then `pad` pad rows repeating row 0 (ragged.pack with a bound). Returns (q, k_cache,
    v_cache, lens, slots, offsets, mask, row_start, T). Mask columns past a row's own node are random."""
    R = len(counts)
    tree = random_tree_mask(R, N)
    slots_of = torch.randperm(R + 1)[:R]
    lens_of = torch.randint(0, S - N, (R,))
    request, node = [], []
    for r, c in enumerate(counts):
        request += [r] * c
        node += sorted(torch.randperm(N)[:c].tolist())
    T = len(request)
    request = torch.tensor(request + request[:1] * pad)
    node = torch.tensor(node + node[:1] * pad)
    P = T + pad
    row_start = torch.tensor([0, *torch.tensor(counts).cumsum(0).tolist()], dtype=torch.int32, device=device)
    q = torch.randn(P, 1, H, D).to(dtype).to(device)
    k_cache = torch.randn(R + 1, KH, S, D).to(dtype).to(device)
    v_cache = torch.randn(R + 1, KH, S, D).to(dtype).to(device)
    lens = lens_of[request].to(torch.int32).to(device)
    slots = slots_of[request].to(torch.int32).to(device)
    offsets = node.to(torch.int32).to(device)
    junk = torch.rand(P, N) < 0.5   # columns past a row's own node: ignored (the per-row kernel never reads them)
    mask = (tree[request, node] | (junk & (torch.arange(N)[None, :] > node[:, None])))[:, None].to(device)
    return q, k_cache, v_cache, lens, slots, offsets, mask, row_start, T


@pytest.mark.parametrize("dtype, kv_heads, num_splits, pad", [  # GQA ratios 4, 1, 2 (H = 4)
    (torch.float32, 1, 3, 3), (torch.bfloat16, 4, 1, 0), (torch.bfloat16, 2, 3, 2)])
def test_grouped_rows_equal_the_per_row_mode(seed, device, kt, dtype, kv_heads, num_splits, pad):
    """Grouped (request-major) attention of a packed forward: requests of different row counts, a
    frozen one (no rows, also last: row_start[R] may equal P), a tree mask, splits, GQA, pad rows.
    Every real row equals the per-row mode and the reference; pad rows are zero; the arrival
    counters are left zeroed."""
    from specir.backends.triton.kernels.attention import counter_buffer
    H, D, S, N = 4, 16, 96, 5
    q, k_cache, v_cache, lens, slots, offsets, mask, row_start, T = _packed_batch(
        [3, 0, 5, 1, 0], N, pad, H, kv_heads, D, S, dtype, device)
    args = dict(slots=slots, offsets=offsets, num_splits=num_splits, block_n=16, min_chunk=16)
    grouped = attention(q, k_cache, v_cache, lens, mask, out=kt.poisoned(q.shape, dtype, device), row_start=row_start,
                        **args)
    per_row = attention(q, k_cache, v_cache, lens, mask, out=kt.poisoned(q.shape, dtype, device), **args)
    kt.close(grouped[:T], per_row[:T])
    kt.close(grouped[:T], ref.attention_reference(q, k_cache, v_cache, lens, mask, slots=slots, offsets=offsets)[:T])
    assert torch.equal(grouped[T:], torch.zeros_like(grouped[T:]))
    assert int(counter_buffer(device, 1)[:256].abs().sum()) == 0


def test_grouped_pad_rows_never_reach_a_real_row(seed, device, kt):
    """NaN in a pad row's query (a junk pad row) leaves every real row bit for bit unchanged and the
    pad rows' output zero (finite), with split partials merged."""
    H, KH, D, S, N = 4, 2, 16, 64, 4
    q, k_cache, v_cache, lens, slots, offsets, mask, row_start, T = _packed_batch(
        [2, 4, 1], N, 5, H, KH, D, S, torch.bfloat16, device)
    args = dict(slots=slots, offsets=offsets, row_start=row_start, num_splits=2, block_n=16, min_chunk=16)
    clean = attention(q, k_cache, v_cache, lens, mask, **args)
    q[T:] = float("nan")
    junk = attention(q, k_cache, v_cache, lens, mask, out=kt.poisoned(q.shape, torch.bfloat16, device), **args)
    assert torch.equal(junk[:T], clean[:T])
    assert torch.equal(junk[T:], torch.zeros_like(junk[T:]))


def test_grouped_rows_with_a_sliding_window(seed, device, kt):
    """A windowed target's packed forward: committed rows windowed per row (positions lens + depth),
    the request's scratch rows always seen (window > U)."""
    H, KH, D, S, N = 4, 1, 16, 96, 4
    q, k_cache, v_cache, lens, slots, offsets, mask, row_start, T = _packed_batch(
        [4, 2, 3], N, 2, H, KH, D, S, torch.float32, device)
    pos = (lens.long() + mask[:, 0].sum(-1) - 1)[:, None].contiguous()
    args = dict(slots=slots, offsets=offsets, pos=pos, window=9)
    out = attention(q, k_cache, v_cache, lens, mask, row_start=row_start, num_splits=2, block_n=16, min_chunk=16,
                    **args)
    kt.close(out[:T], ref.attention_reference(q, k_cache, v_cache, lens, mask, **args)[:T])
    with pytest.raises(ValueError, match="exceed"):
        attention(q, k_cache, v_cache, lens, mask, row_start=row_start, slots=slots, offsets=offsets, pos=pos,
                  window=N)


def test_grouped_grid_comes_from_shapes():
    """The grouped grid: (requests + 1 (the pad rows)) x kv heads, row blocks of U x G rows."""
    from specir.backends.triton.kernels.attention import attention_config, attention_grid
    cfg = attention_config(64, 8, 32, 8, 128, 512, sm=132, grouped=True)
    assert attention_grid(cfg) == ((64 + 1) * 8, 1, cfg["num_splits"]) and cfg["grouped"]
    assert cfg["block_m"] == 32 and cfg["num_splits"] == attention_config(64, 8, 32, 8, 128, 512, sm=132)["num_splits"]
