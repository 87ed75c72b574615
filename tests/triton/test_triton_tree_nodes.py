"""draft.tree's nodes kernel (backends/triton/kernels/tree_nodes.py) against TreeState.nodes
(specir/step/ops/draft_tree.py): tokens, parents, depths, validity, scores and the ancestor mask of
trees grown level by level from random rankings (ties, pruned candidates, budgets below and above
the candidates, a narrower tree listed at a wider op's width)."""
import math

import pytest
import torch

from specir.backends.triton.kernels.tree_nodes import MAX_WIDTH, fits, tree_nodes
from specir.step.ops.draft_tree import TreeState
from tests.triton.test_triton_tree_expand import ranked

FIELDS = ("tokens", "parents", "depths", "valid", "mask", "score")


def grown(B, depth, K, budget, device, dynamic, ties, width=None):
    tree = TreeState(B, depth, K, budget, device, math.log(0.05) if dynamic else -math.inf, width)
    for level in range(depth):
        vals, toks = ranked(B, 1 if level == 0 else K, K, 1000, ties)
        if level == 0:
            vals, toks = vals[:, 0], toks[:, 0]
        tree.expand(level, vals.to(device), toks.to(device), None)
    return tree


@pytest.mark.parametrize("K,depth,budget,dynamic,ties,width", [
    (4, 3, 10, False, False, None), (3, 4, 12, True, True, None), (8, 4, 64, False, True, None),
    (2, 3, 100, False, False, None), (1, 5, 3, False, False, None), (3, 3, 6, False, True, 20), (5, 1, 4, True, False, None)])
def test_the_kernel_lists_the_nodes_torch_lists(seed, device, K, depth, budget, dynamic, ties, width):
    B = 3
    tree = grown(B, depth, K, budget, device, dynamic, ties, width)
    pending = torch.randint(0, 1000, (B,), device=device)
    want, got = tree.nodes(pending), tree_nodes(tree, pending)
    for name in FIELDS:
        a, b = getattr(want, name), getattr(got, name)
        assert a.dtype == b.dtype and torch.equal(b, a), name
    assert (got.max_depth, got.max_children) == (want.max_depth, want.max_children)


def test_wide_trees_list_in_torch():
    assert fits(TreeState(1, 6, 8, MAX_WIDTH - 1, "cpu", -math.inf))
    assert not fits(TreeState(1, 6, 8, MAX_WIDTH, "cpu", -math.inf))


def test_nan_scores_count_as_pruned_and_never_push_nodes_past_the_row(seed, device):
    """A hand-filled table with NaN scores (TreeState itself stores none: its pruning makes them
    -inf): the kernel lists what torch lists for the table with -inf in their place, exactly N
    nodes, nothing written into another request's row."""
    tree = grown(2, 3, 3, 6, device, False, False)
    tree.score[0, 1:4] = math.nan
    pending = torch.tensor([7, 9], device=device)
    got = tree_nodes(tree, pending)
    tree.score.copy_(torch.where(tree.score.isnan(), -math.inf, tree.score))
    want = tree.nodes(pending)
    for name in FIELDS:
        assert torch.equal(getattr(got, name), getattr(want, name)), name
