"""Two-level verification of a hybrid target on the Triton backend (the interpreter without a GPU): the mid level's
recurrent ops on Triton decode as the target does (the reference runs: test_hybrid_passes.py). A file of its own so
that the suite's workers share the hybrid pass tests."""
from __future__ import annotations

import os

import pytest
import torch

from specir.pass_infra import PassManager, build_passes
from specir.runtime.baseline import ar_pipeline
from specir.runtime.session import make_engine
from tests.hybrid.helpers import PASS_PROMPTS, pass_pipeline


@pytest.mark.parametrize("passes", ["tree-verify{budget=6,topk=2,depth=3},two-level-verify{kind=layers,layers=2,extend=3}",
                                    "two-level-verify{kind=window,window=3,extend=3}"], ids=["layers-tree", "window-chain"])
def test_triton_two_level_of_a_hybrid_decodes_as_the_target(passes, pass_checkpoints):
    """The mid level's recurrent ops on Triton: a tree judged from the feed's chain, extensions that continue
    from the accepted path's node states (the gated delta WY factors among them) before the feed is committed."""
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs the Triton interpreter or a GPU")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    targets, drafter, _ = pass_checkpoints
    pipeline = PassManager(build_passes(passes)).run(pass_pipeline(targets["qwen3_5"], drafter))
    got = make_engine(pipeline, "triton", device, None).generate(PASS_PROMPTS, 6)
    want = make_engine(ar_pipeline(pipeline, stock=False), "triton", device, None).generate(PASS_PROMPTS, 6)
    assert [r.tokens for r in got] == [r.tokens for r in want]
