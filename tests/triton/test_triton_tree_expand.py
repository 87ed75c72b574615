"""draft.tree's expansion kernel (backends/triton/kernels/tree_expand.py) against TreeState.expand
(specir/step/ops/draft_tree.py), table for table, level by level: candidates, frontier, fed rows, the
row table and the next level's ids, mask, offsets and positions; then the nodes the tree lists."""
import math
from types import SimpleNamespace

import pytest
import torch

from specir.backends.triton.kernels.tree_expand import MAX_K, expand_tree, fits
from specir.step.ops.draft_tree import TreeState



def feed_for(tree, lens):
    z = lambda *shape, dtype: torch.zeros(*shape, dtype=dtype, device=lens.device)  # noqa: E731
    return SimpleNamespace(ids=z(tree.B, tree.K, dtype=torch.long), pos=z(tree.B, tree.K, dtype=torch.long),
                           offsets=z(tree.B, dtype=torch.int32), mask=z(tree.B, tree.K, tree.U, dtype=torch.bool),
                           lens=lens)


def ranked(B, rows, K, vocab, ties):
    """What a drafter's ranking returns: log-probabilities descending (ties: few distinct values,
    -inf among them; "nan": some rows all NaN, as a row of logits with no finite entry ranks),
    distinct token ids per row."""
    if ties == "nan":
        vals = -torch.rand(B, rows, K) * 5
        vals[torch.rand(B, rows) < 0.3] = math.nan
    elif ties:
        vals = -torch.randint(0, 3, (B, rows, K)).float()
        vals[torch.rand(B, rows, K) < 0.1] = -math.inf
    else:
        vals = -torch.rand(B, rows, K) * 5
    vals = torch.sort(vals, dim=-1, descending=True).values
    toks = torch.argsort(torch.rand(B, rows, vocab), dim=-1)[..., :K]
    return vals, toks


@pytest.mark.parametrize("K,depth,dynamic,ties", [(1, 3, False, False), (3, 4, False, True), (4, 3, True, False),
                                                   (8, 4, False, True), (5, 1, False, False), (3, 3, False, "nan"),
                                                   (4, 3, True, "nan")])
def test_the_kernel_writes_the_tables_torch_writes(seed, device, K, depth, dynamic, ties):
    B, budget = 3, 20
    log_min = math.log(0.05) if dynamic else -math.inf
    want, got = (TreeState(B, depth, K, budget, device, log_min) for _ in range(2))
    lens = torch.randint(1, 50, (B,), dtype=torch.int32, device=device)
    feeds = feed_for(want, lens), feed_for(got, lens)
    for level in range(depth):
        vals, toks = ranked(B, 1 if level == 0 else K, K, 1000, ties)
        if level == 0:
            vals, toks = vals[:, 0], toks[:, 0]
        vals, toks = vals.to(device), toks.to(device)
        last = level + 1 == depth
        want.expand(level, vals, toks, None if last else feeds[0])
        expand_tree(got, level, vals, toks, None if last else feeds[1])
        for name in TreeState.TABLES:
            assert torch.equal(getattr(got, name), getattr(want, name)), (level, name)
        if not last:
            for name in ("ids", "mask", "offsets", "pos"):
                assert torch.equal(getattr(feeds[1], name), getattr(feeds[0], name)), (level, name)
    pending = torch.arange(B, device=device)
    a, b = want.nodes(pending), got.nodes(pending)
    for name in ("tokens", "parents", "depths", "valid", "mask", "score"):
        assert torch.equal(getattr(b, name), getattr(a, name)), name


def test_wide_trees_expand_in_torch():
    small, wide = (TreeState(1, 2, k, 8, "cpu", -math.inf) for k in (MAX_K, MAX_K + 1))
    assert fits(small) and not fits(wide)
