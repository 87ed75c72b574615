"""The other issues' passes on hybrid targets (docs/HYBRID.md, "CLI, per family"): two-level-verify with an
attention-only mid model (under n-gram drafting) and draft-vocab{order=frequency} on the drafter decode as
the hybrid target does (greedy, against its AR engine); two-level-verify{kind=layers|window} refuses a
hybrid target by name, with a hint (batch-fusion: tests/hybrid/test_hybrid_batch_fusion.py)."""
from __future__ import annotations

import pytest

from specir.errors import SpecirError
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from specir.pipeline_template import pipeline_text
from specir.runtime.baseline import ar_pipeline
from specir.runtime.session import make_engine
from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.hybrid.checkpoints import make_hybrid_checkpoint

VOCAB = 259  # a byte-level tokenizer's size (draft-vocab{order=frequency} ranks with the drafter's tokenizer)
PROMPTS = [[5, 6, 7, 5, 6, 7, 9, 5, 6], [1, 2, 3]]
FAMILIES = ["qwen3_5", "bamba"]  # a Gated DeltaNet family and a Mamba2 one


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{family: target folder}, the Llama drafter and a ranking corpus, all with a 259-id vocabulary."""
    root = tmp_path_factory.mktemp("hybrid_passes")
    drafter = make_checkpoint("llama", root / "d", seed=11, vocab_size=VOCAB, num_hidden_layers=1)
    targets = {f: make_hybrid_checkpoint(f, root / f, seed=40 + i, vocab_size=VOCAB) for i, f in enumerate(FAMILIES)}
    for folder in (drafter, *targets.values()):
        write_tokenizer(folder, VOCAB)
    corpus = root / "traffic.txt"
    corpus.write_text("def parse(x):\n    return [t for t in x if t]\n" * 4)
    return targets, drafter, corpus


def _pipeline(target, drafter):
    return load_pipeline("<test>", text=pipeline_text("p", str(target), str(drafter), 3))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("passes", ["two-level-verify{kind=model,model=drafter,extend=2},ngram-draft{k=4}",
                                    "tree-verify{budget=6,topk=2},draft-vocab{size=64,order=frequency,corpus=CORPUS}"],
                         ids=["two-level-model", "draft-vocab-frequency"])
def test_passes_decode_as_the_hybrid_target(family, passes, checkpoints):
    targets, drafter, corpus = checkpoints
    pipeline = PassManager(build_passes(passes.replace("CORPUS", f'"{corpus}"'))).run(_pipeline(targets[family], drafter))
    got = make_engine(pipeline, "reference", "cpu", None).generate(PROMPTS, 10)
    want = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None).generate(PROMPTS, 10)
    assert [r.tokens for r in got] == [r.tokens for r in want]


@pytest.mark.parametrize("passes, message", [("two-level-verify{kind=layers}", "attention-only"),
                                             ("two-level-verify{kind=window,window=4}", "attention-only")])
def test_passes_that_refuse_a_hybrid_target_say_so(passes, message, checkpoints):
    targets, drafter, _ = checkpoints
    with pytest.raises(SpecirError, match=message) as err:
        PassManager(build_passes(passes)).run(_pipeline(targets["qwen3_5"], drafter))
    assert err.value.hint
