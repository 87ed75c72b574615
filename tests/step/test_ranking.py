"""ranking.py: half-precision logits rank as their float32 log-softmax does, without a float32 copy."""
import math

import pytest
import torch

from specir.step.ranking import log_prob_of, log_sum_exp, top_log_probs


def _logits(dtype, rows=6, vocab=5000, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, vocab, generator=g) * 4
    x[0, 17] = 30.0  # one confident row
    x[1] = x[1].round()  # many ties
    return x.to(dtype)


def test_float32_is_exactly_log_softmax():
    x = _logits(torch.float32)
    vals, ids = top_log_probs(x, 8)
    ref_vals, ref_ids = torch.topk(torch.log_softmax(x, -1), 8, -1)
    assert torch.equal(vals, ref_vals) and torch.equal(ids, ref_ids)
    tok = torch.tensor([17, 3, 4, 5, 6, 7])
    assert torch.equal(log_prob_of(x, tok), torch.log_softmax(x, -1).gather(1, tok[:, None])[:, 0])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_agrees_with_float32_log_softmax(dtype):
    x = _logits(dtype)
    exact = torch.log_softmax(x.float(), -1)
    vals, ids = top_log_probs(x, 8)
    assert vals.dtype == torch.float32 and ids.dtype == torch.long
    # the same values at the chosen ids (ties may pick other ids of equal logit), to 1e-3 nats
    torch.testing.assert_close(vals, exact.gather(1, ids), atol=2e-3, rtol=0)
    torch.testing.assert_close(vals, torch.topk(exact, 8, -1).values, atol=2e-3, rtol=0)
    assert torch.all(vals[:, :-1] >= vals[:, 1:])
    tok = ids[:, 3]
    torch.testing.assert_close(log_prob_of(x, tok), exact.gather(1, tok[:, None])[:, 0], atol=2e-3, rtol=0)
    torch.testing.assert_close(log_sum_exp(x), torch.logsumexp(x.float(), -1), atol=2e-3, rtol=0)


def test_masked_rows_stay_finite_where_they_can():
    x = torch.full((2, 10), -math.inf, dtype=torch.bfloat16)
    x[0, 3] = 1.0
    lse = log_sum_exp(x)
    assert lse[0].item() == pytest.approx(1.0) and lse[1].item() == -math.inf
    vals, ids = top_log_probs(x, 1)
    assert ids[0, 0].item() == 3 and vals[0, 0].item() == pytest.approx(0.0)
