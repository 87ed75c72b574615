"""Pipelines and runners over a hybrid checkpoint for the tests."""
from __future__ import annotations

import torch

from specir.load import load_pipeline
from specir.runtime.model_runner import ModelRunner
from specir.runtime.weights import load_weights


def ar_pipeline(folder, dtype: str = "f32"):
    return load_pipeline("<t>", text=f'pipeline p {{\n  model @target = import("{folder}") attributes '
                                      f'{{dtype = "{dtype}"}}\n  step(%ctx: context) {{\n'
                                      "    %lg = verify.chain @target, %ctx\n    %a = accept.greedy %lg\n"
                                      "    commit %ctx, %a\n  }\n}\n")


def forced_greedy(folder, prompts, n):
    """Plain greedy decoding through the engine (reference kernels, fp32), each sequence checked
    by token forcing against transformers' forward (fp32 ties within 1e-4 of the logit range)."""
    from transformers import AutoModelForCausalLM

    from specir.runtime.session import make_engine
    results = [r.tokens for r in make_engine(ar_pipeline(folder, "f32"), "reference", "cpu", None).generate(prompts, n)]
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    for prompt, tokens in zip(prompts, results):
        with torch.no_grad():
            logits = hf(torch.tensor([prompt + tokens[:-1]])).logits[0, len(prompt) - 1:]
        best = logits.argmax(-1)
        gap = logits.gather(1, best[:, None])[:, 0] - logits.gather(1, torch.tensor(tokens)[:, None])[:, 0]
        assert bool((gap <= 1e-4 * logits.abs().max()).all()), (prompt, tokens, best.tolist())
    return results


def runner_for(folder, dtype: str = "f32", slots: int = 2, max_seq: int = 96, **kw) -> ModelRunner:
    model = ar_pipeline(folder, dtype).model("target")
    return ModelRunner(model, load_weights(model), slots=slots, max_seq=max_seq, **kw)


def feed(runner, slot: int, tokens: list[int]) -> torch.Tensor:
    """Feed tokens one at a time into `slot`, committing each; logits [len, V]."""
    out = []
    for tok in tokens:
        base = runner.cache.lens[slot]
        out.append(runner.forward([slot], torch.tensor([[tok]]), torch.tensor([[base]]))[0, 0])
        runner.cache.commit_prefix(slot, 1)
    return torch.stack(out)


def prefill(runner, slot: int, tokens: list[int]) -> torch.Tensor:
    base = runner.cache.lens[slot]
    logits = runner.forward([slot], torch.tensor([tokens]), torch.arange(base, base + len(tokens))[None])[0]
    runner.cache.commit_prefix(slot, len(tokens))
    return logits


def committed_states(runner, slot: int) -> dict:
    return {k: v[slot].clone() for k, v in runner.cache.recurrent.committed.items()}
