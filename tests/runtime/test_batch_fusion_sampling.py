"""Lossless speculative sampling through batch-fusion (tests/runtime/test_sampling.py's chi-square test
on V = 12): the packed verify, and a shared budget that gives each of the 3000 requests of the
batch a different share of drafted tokens by confidence, keep the target's law."""
from __future__ import annotations

import pytest

from tests.helpers.specs import write_spec
from tests.runtime.test_sampling import chi2_pvalues, exact_marginals, sample_tokens, small_pair  # noqa: F401


@pytest.mark.parametrize("kind, passes", [
    ("chain_budget", "batch-fusion{shrink=false,budget=4000}"),
    ("tree_packed", "tree-verify{budget=6,topk=3},batch-fusion{shrink=false,budget=9000,split=equal}"),
])
def test_fused_sampling_matches_target_sampling(kind, passes, small_pair):  # noqa: F811
    root, target, drafter = small_pair
    spec = write_spec(root, kind, target, drafter, k=3, passes=passes, dtype="f32")
    pvalues = chi2_pvalues(sample_tokens(spec), exact_marginals(target))
    assert min(pvalues) > 1e-4, pvalues
