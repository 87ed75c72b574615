"""A mid level equal to the hybrid target accepts its whole proposal on the Triton backend (the interpreter without a
GPU), over a chain and a tree (tests.hybrid.helpers.mid_level_accepts_whole_proposals; the reference runs:
test_hybrid_passes.py). A file of its own so that the suite's workers share the hybrid pass tests."""
from __future__ import annotations

import os

import pytest
import torch

from tests.hybrid.helpers import mid_level_accepts_whole_proposals


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_a_mid_level_equal_to_the_hybrid_target_accepts_its_whole_proposal_on_triton(tree, pass_checkpoints):
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs the Triton interpreter or a GPU")
    mid_level_accepts_whole_proposals(tree, "triton", pass_checkpoints)
