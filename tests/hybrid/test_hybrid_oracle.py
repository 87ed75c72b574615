"""Hybrid families against transformers, on tiny random checkpoints made with transformers' own
config classes (tests/hybrid/checkpoints.py).

Tolerances, as a fraction of the reference's logit range (max |logit|):
- fp32: 1e-4 (observed: ~1e-6; the recurrences run token by token, transformers' prefill in chunks);
- bf16: within 6% of transformers in bf16, and no farther from transformers in fp32 than
  2 x transformers' own bf16 distance from fp32 + 1% (bf16 rounding of these random models moves
  transformers itself by 1-28% of the range: the criterion is to be as accurate as it is).
Greedy decoding through the engine (prefill, then one token a step) equals transformers' generate
(fp32)."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from specir.runtime.session import make_engine
from tests.hybrid.checkpoints import HYBRID_FAMILIES, VOCAB
from tests.hybrid.helpers import ar_pipeline, runner_for

TORCH = {"f32": torch.float32, "bf16": torch.bfloat16}


def _ours(folder, dtype, ids):
    """Prefill 9 tokens of two requests, then one token at a time (commit after each)."""
    runner = runner_for(folder, dtype)
    B, T = ids.shape
    pos = torch.arange(T)[None].expand(B, T)
    outs = [runner.forward([0, 1], ids[:, :9], pos[:, :9])]
    for s in (0, 1):
        runner.cache.commit_prefix(s, 9)
    for t in range(9, T):
        outs.append(runner.forward([0, 1], ids[:, t:t + 1], pos[:, t:t + 1]))
        for s in (0, 1):
            runner.cache.commit_prefix(s, 1)
    return torch.cat(outs, dim=1).float()


def _hf(folder, dtype, ids):
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=TORCH[dtype]).eval()
    with torch.no_grad():
        return hf(ids).logits.float()


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_fp32_logits_match_transformers(family, hybrid_checkpoints):
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (2, 15))
    ref = _hf(hybrid_checkpoints[family], "f32", ids)
    err = (_ours(hybrid_checkpoints[family], "f32", ids) - ref).abs().max() / ref.abs().max()
    assert err < 1e-4, f"{family} fp32: max error {err:.2e} of the logit range"


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_bf16_logits_match_transformers(family, hybrid_checkpoints):
    torch.manual_seed(1)
    ids = torch.randint(0, VOCAB, (2, 15))
    folder = hybrid_checkpoints[family]
    ref32, ref16 = _hf(folder, "f32", ids), _hf(folder, "bf16", ids)
    ours = _ours(folder, "bf16", ids)
    scale = ref32.abs().max()
    vs16 = (ours - ref16).abs().max() / scale
    vs32 = (ours - ref32).abs().max() / scale
    hf_own = (ref16 - ref32).abs().max() / scale
    assert vs16 < 0.06, f"{family} bf16: {vs16:.3f} of the range from transformers (bf16)"
    assert vs32 <= 2 * hf_own + 0.01, f"{family} bf16: {vs32:.3f} from fp32, transformers bf16 is {hf_own:.3f}"


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_greedy_tokens_equal_generate(family, hybrid_checkpoints):
    folder = hybrid_checkpoints[family]
    engine = make_engine(ar_pipeline(folder, "f32"), "reference", "cpu", None)
    prompts = [[5, 17, 33, 2, 9, 41, 7, 8, 60, 11], [3, 4], [90]]
    results = engine.generate(prompts, 12)
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    for prompt, result in zip(prompts, results):
        expected = hf.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False,
                               pad_token_id=0)[0, len(prompt):].tolist()
        assert result.tokens == expected, family
        assert result.accept_lengths == [1] * 12
