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
