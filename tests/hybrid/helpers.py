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


# the pass tests' pair (tests/hybrid/conftest.py's `pass_checkpoints`): a byte-level tokenizer's size, which
# draft-vocab{order=frequency} ranks with; a Gated DeltaNet family and a Mamba2 one
PASS_VOCAB = 259
PASS_FAMILIES = ["qwen3_5", "bamba"]
PASS_PROMPTS = [[5, 6, 7, 5, 6, 7, 9, 5, 6], [1, 2, 3]]


def pass_pipeline(target, drafter):
    """The template pipeline (a k = 3 chain) of `target` drafted by `drafter`."""
    from specir.pipeline_template import pipeline_text
    return load_pipeline("<test>", text=pipeline_text("p", str(target), str(drafter), 3))


def mid_level_accepts_whole_proposals(tree: bool, backend: str, pass_checkpoints) -> None:
    """The hybrid target drafts for itself and kind=window past the context makes @mid the target too: @mid
    accepts the draft's greedy path (k = 3 tokens of a chain; at least the first of a tree) and the target
    all `extend` tokens of the mid's extension every step, which holds only if each extension continues from
    the right recurrent state (the accepted path's last node, before the feed is committed)."""
    from specir.pass_infra import PassManager, build_passes
    from specir.runtime.session import make_engine
    device = "cuda" if backend == "triton" and torch.cuda.is_available() else "cpu"
    targets, _, _ = pass_checkpoints
    passes = ("tree-verify{budget=6,topk=2,depth=3}," if tree else "") + "two-level-verify{kind=window,window=4096,extend=3}"
    pipeline = PassManager(build_passes(passes)).run(pass_pipeline(targets["qwen3_5"], targets["qwen3_5"]))
    for r in make_engine(pipeline, backend, device, None).generate(PASS_PROMPTS, 16):
        steps = r.accept_lengths[:-1]  # the last step stops at the token limit
        assert min(steps) >= 1 + 1 + 3 and (tree or min(steps) == 3 + 3 + 1), r.accept_lengths
