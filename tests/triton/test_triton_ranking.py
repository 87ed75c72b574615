"""The ranking kernels (backends/triton/kernels/ranking.py) against specir/step/ranking.py's torch
ranking, computed here in float64: the same ids, equal logits in ascending id order, log-probabilities
within fp32 rounding."""
import math

import pytest
import torch

from specir.backends.triton.kernels import ranking
from specir.backends.triton.kernels.ranking import log_prob_of, top_log_probs
from specir.step import ranking as torch_ranking


def expected_top(logits: torch.Tensor, k: int):
    """log-probabilities in float64 and ids: descending, lowest id first among equal logits."""
    x = logits.double().cpu()
    x = torch.where(x.isnan(), -math.inf, x)
    order = torch.sort(x, dim=-1, descending=True, stable=True).indices[..., :k]
    return (x - torch.logsumexp(x, dim=-1, keepdim=True)).gather(-1, order), order


def assert_ranks(logits: torch.Tensor, k: int):
    vals, ids = top_log_probs(logits, k)
    want_vals, want_ids = expected_top(logits, k)
    assert ids.dtype == torch.int64 and vals.dtype == torch.float32
    assert torch.equal(ids.cpu(), want_ids)
    finite = torch.isfinite(want_vals)
    assert torch.equal(torch.isfinite(vals.cpu()), finite)
    assert torch.allclose(vals.cpu().double()[finite], want_vals[finite], atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,k", [((1, 5000), 8), ((3, 4, 1030), 5), ((2, 70), 1), ((1, 40000), 64)])
def test_top_log_probs_match_the_sorted_log_softmax(seed, device, dtype, shape, k):
    assert_ranks((3 * torch.randn(*shape)).to(dtype).to(device), k)


def test_equal_logits_rank_in_ascending_id_order(seed, device):
    """Integer logits: many ties, across chunk boundaries (the merge keeps the id order)."""
    logits = torch.randint(0, 4, (3, 9000)).float().to(device)
    logits[1] = 0.0  # one value everywhere: ids 0..k-1
    assert_ranks(logits, 16)


def test_a_narrowed_vocabulary_ranks_only_its_kept_ids(seed, device):
    """vocab_scatter's output: -inf off a few kept ids, whole chunks of -inf between them; a row
    with fewer finite logits than k ranks the rest as -inf, ids ascending (distinct)."""
    V = 12000
    logits = torch.full((2, V), -math.inf)
    kept = torch.randperm(V)[:300]
    logits[0, kept] = torch.randn(300)
    logits[1, kept[:3]] = torch.randn(3)
    vals, ids = top_log_probs(logits.to(device), 8)
    assert set(ids[0].tolist()) <= set(kept.tolist())
    assert_ranks(logits.to(device), 8)
    assert len(set(ids[1].tolist())) == 8 and torch.isinf(vals[1, 3:]).all()


def test_nan_logits_rank_last(seed, device):
    logits = torch.randn(2, 3000)
    logits[0, 17] = math.nan
    vals, ids = top_log_probs(logits.to(device), 4)
    assert 17 not in ids[0].tolist()
    assert_ranks(logits.to(device), 4)


def test_the_kernels_agree_with_the_torch_ranking_the_reference_uses(seed, device):
    """bf16 logits, as a GPU drafter's lm head writes them: the torch half path's values (its
    exponentials in bf16) within its stated 1e-3 nats."""
    logits = (4 * torch.randn(6, 32000)).to(torch.bfloat16).to(device)
    vals, ids = top_log_probs(logits, 8)
    t_vals, t_ids = torch_ranking.top_log_probs(logits.cpu(), 8)
    assert torch.allclose(vals.cpu(), t_vals, atol=2e-3)
    # the same logits ranked (bf16 ties at the k-th place may pick another id of that logit)
    assert torch.equal(logits.cpu().gather(-1, ids.cpu()), logits.cpu().gather(-1, t_ids))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_log_prob_of_is_the_token_logit_minus_the_normaliser(seed, device, dtype):
    logits = (3 * torch.randn(2, 3, 20000)).to(dtype)
    token = torch.randint(0, 20000, (2, 3))
    got = log_prob_of(logits.to(device), token.to(device))
    want = torch.log_softmax(logits.double(), dim=-1).gather(-1, token[..., None])[..., 0]
    assert got.dtype == torch.float32 and got.shape == (2, 3)
    assert torch.allclose(got.cpu().double(), want, atol=1e-4)


def test_fits_sends_wide_k_to_torch():
    assert ranking.fits(128256, 8) and ranking.fits(60, 60) and ranking.fits(128256, ranking.MAX_K)
    assert not ranking.fits(128256, ranking.MAX_K + 1) and not ranking.fits(60, 61)
    with pytest.raises(ValueError, match="rank 1..64"):
        top_log_probs(torch.zeros(1, 100), 65)


def test_chunking_keeps_the_candidates_one_program_merges(device):
    for rows, vocab, k in [(1, 128256, 64), (64, 128256, 8), (1, 152064, 32), (8, 4096, 8), (3, 70, 5)]:
        chunks, chunk = ranking.chunking(rows, vocab, k, device)
        assert chunks * chunk >= vocab and chunks * k <= ranking.MAX_CANDIDATES
        assert ranking.MIN_CHUNK <= chunk <= ranking.MAX_CHUNK or chunk == triton_next_pow2(vocab)


def triton_next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()
