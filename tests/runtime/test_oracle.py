"""The reference backend against transformers: logits within stated tolerances (fp32: 1e-4 of the
logit range; bf16: 3% of it, or twice transformers' own bf16 error against its fp32 forward where
that is larger: two bf16 computations each that far from the exact logits can differ by both) over
prefill and incremental decode, and greedy autoregressive tokens identical to transformers'
generate (fp32)."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from specir.load import load_pipeline
from specir.runtime.session import make_engine
from specir.runtime.model_runner import ModelRunner
from specir.runtime.weights import load_weights
from tests.helpers.checkpoints import FAMILIES

TOLERANCE = {"f32": 1e-4, "bf16": 3e-2}
TORCH = {"f32": torch.float32, "bf16": torch.bfloat16}


def ar_pipeline(folder, dtype):
    return load_pipeline("<t>", text=f'pipeline p {{\n  model @target = import("{folder}") attributes '
                                      f'{{dtype = "{dtype}"}}\n  step(%ctx: context) {{\n'
                                      "    %lg = verify.chain @target, %ctx\n    %a = accept.greedy %lg\n"
                                      "    commit %ctx, %a\n  }\n}\n")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("family", FAMILIES)
def test_logits_match_transformers(family, dtype, family_checkpoints, seed):
    folder = family_checkpoints[family]
    model = ar_pipeline(folder, dtype).model("target")
    runner = ModelRunner(model, load_weights(model), slots=2, max_seq=64)
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=TORCH[dtype]).eval()
    ids = torch.randint(0, 96, (2, 14))
    pos = torch.arange(14)[None].expand(2, 14)
    with torch.no_grad():
        ref = hf(ids).logits.float()
    first = runner.forward([0, 1], ids[:, :9], pos[:, :9])
    for s in (0, 1):
        runner.cache.commit_prefix(s, 9)
    rest = []
    for t in range(9, 14):
        rest.append(runner.forward([0, 1], ids[:, t:t + 1], pos[:, t:t + 1]))
        for s in (0, 1):
            runner.cache.commit_prefix(s, 1)
    ours = torch.cat([first, *rest], dim=1).float()
    scale = ref.abs().max()
    err = (ours - ref).abs().max() / scale
    bound = TOLERANCE[dtype]
    if dtype == "bf16":
        with torch.no_grad():
            exact = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()(ids).logits.float()
        bound = max(bound, 2 * float((ref - exact).abs().max() / exact.abs().max()))
    assert err < bound, f"{family} {dtype}: max error {err:.2e} of the logit range (bound {bound:.2e})"


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_tokens_equal_generate(family, family_checkpoints):
    folder = family_checkpoints[family]
    engine = make_engine(ar_pipeline(folder, "f32"), "reference", "cpu", None)
    prompts = [[5, 17, 33, 2, 9, 41, 7, 8, 60, 11], [3, 4], [90]]
    results = engine.generate(prompts, 16)
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    for prompt, result in zip(prompts, results):
        expected = hf.generate(torch.tensor([prompt]), max_new_tokens=16, do_sample=False,
                               pad_token_id=0)[0, len(prompt):].tolist()
        assert result.tokens == expected
        assert result.accept_lengths == [1] * 16
