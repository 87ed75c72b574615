"""Lossless speculative sampling: on a small-vocabulary model (V = 12), the distribution of the
first three sampled tokens under speculative sampling matches target-only sampling.

The target's exact marginals are computed from its own logits (summing over earlier tokens), and
N = 3000 samples per pipeline are compared with a chi-square goodness-of-fit test at alpha = 1e-4
per position (df = 11). Power: a deviation of total-variation 0.05 spread over two cells of
probability ~1/12 gives a noncentrality of ~36, detected with probability > 0.9; the negative
control (a sampler that emits drafts unverified) is rejected with p < 1e-30 at the seed used.
"""
from __future__ import annotations

import itertools

import pytest
import torch
from scipy.stats import chisquare

from specir.ir.opdefs import OPS
from specir.load import load_pipeline
from specir.runtime.session import make_engine
from tests.helpers.checkpoints import make_checkpoint
from tests.helpers.specs import write_spec

V, N, STEPS, T = 12, 3000, 3, 0.9
PROMPT = [3, 7, 1]


@pytest.fixture(scope="module")
def small_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("sampling")
    target = make_checkpoint("llama", root / "t", seed=21, vocab_size=V, initializer_range=0.08, dtype=torch.float32)
    drafter = make_checkpoint("llama", root / "d", seed=22, noise_from=target, noise=0.6, dtype=torch.float32)
    return root, target, drafter


def exact_marginals(target_folder) -> list[torch.Tensor]:
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(target_folder, dtype=torch.float32).eval()
    marginals = [torch.zeros(V, dtype=torch.float64) for _ in range(STEPS)]
    with torch.no_grad():
        for prefix_len in range(STEPS):
            for prefix in itertools.product(range(V), repeat=prefix_len):
                ids = torch.tensor([PROMPT + list(prefix)])
                probs = torch.softmax(model(ids).logits[0].double() / T, dim=-1)
                weight = 1.0
                for j, tok in enumerate(prefix):
                    weight *= float(probs[len(PROMPT) - 1 + j, tok])
                marginals[prefix_len] += weight * probs[-1]
    return marginals


def sample_tokens(spec, seed=0) -> torch.Tensor:
    engine = make_engine(load_pipeline(spec), "reference", "cpu", None)
    results = engine.generate([PROMPT] * N, STEPS, temperature=T, seed=seed)
    return torch.tensor([r.tokens[:STEPS] for r in results])


def chi2_pvalues(samples: torch.Tensor, marginals) -> list[float]:
    out = []
    for pos in range(STEPS):
        observed = torch.bincount(samples[:, pos], minlength=V).double()
        expected = marginals[pos] / marginals[pos].sum() * N
        out.append(float(chisquare(observed.numpy(), expected.numpy()).pvalue))
    return out


@pytest.mark.parametrize("kind, passes", [("chain", ""), ("tree", "tree-verify{budget=6,topk=3}"),
                                          ("chain", "draft-vocab{size=6}"),  # q is 0 on ids 6..11
                                          ("chain", "draft-vocab{size=6,order=frequency}")])  # 0 on even ids
def test_speculative_sampling_matches_target_sampling(kind, passes, small_pair, monkeypatch):
    root, target, drafter = small_pair
    if "frequency" in passes:  # no tokenizer at V = 12: the ranking is given (odd ids first), not derived
        import specir.runtime.checkpoint_tensors as tensors
        import specir.token_ranking as ranking
        monkeypatch.setattr(tensors, "_check_ranking_inputs", lambda *a: None)
        monkeypatch.setattr(ranking, "_ranked", lambda folder, vocab, corpus, stamp: tuple(range(V - 1, -1, -2))
                            + tuple(range(V - 2, -1, -2)))
    marginals = exact_marginals(target)
    spec = write_spec(root, kind, target, drafter, k=3, passes=passes, dtype="f32")
    pvalues = chi2_pvalues(sample_tokens(spec), marginals)
    assert min(pvalues) > 1e-4, pvalues
    ar = write_spec(root, "ngram_ar", target, "ngram", k=3, dtype="f32")  # n-gram drafts: deterministic candidates
    assert min(chi2_pvalues(sample_tokens(ar, seed=1), marginals)) > 1e-4


def test_unverified_sampling_is_rejected(small_pair, monkeypatch):
    """Negative control: emitting drafted tokens without the rejection step changes the law."""
    root, target, drafter = small_pair
    import dataclasses

    from specir.step.values import Accepted

    def trusting(ctx, op, args):
        nodes = args[-1].nodes
        B, N = nodes.tokens.shape
        path = torch.arange(N, dtype=torch.int32)[None, :].expand(B, N)
        n = torch.full((B,), N, dtype=torch.int32)
        emitted = torch.cat([nodes.tokens[:, 1:], nodes.tokens[:, -1:]], dim=1)
        return Accepted(path, n, emitted, n.clone(), args[-1].model)

    definition = OPS["accept.sample"]
    monkeypatch.setitem(OPS, "accept.sample", dataclasses.replace(
        definition, step=dataclasses.replace(definition.step, lower=trusting, lowerings={})))
    spec = write_spec(root, "chain_bad", target, drafter, k=3, dtype="f32")
    assert min(chi2_pvalues(sample_tokens(spec), exact_marginals(target))) < 1e-30
