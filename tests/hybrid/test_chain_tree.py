"""Speculative forwards on hybrid targets through the runner (fp32, reference kernels):
- a chain forward of k new tokens gives the logits of k single-token forwards, and committing
  its prefix of j tokens leaves the state that feeding those j tokens leaves;
- a tree forward (ancestor mask, depth positions) gives every node the logits of feeding its
  root-to-node path one token at a time;
- committing node n's path (commit_path) then continuing equals having fed that path.
Tolerance: 1e-5 of the logit range (both sides run the same kernels; only fp32 summation order
differs: linear layers over 1 or k rows round differently), states likewise (of their max)."""
from __future__ import annotations

import pytest
import torch

from tests.hybrid.checkpoints import HYBRID_FAMILIES
from tests.hybrid.helpers import committed_states, feed, prefill, runner_for

PROMPT = [7, 3, 55, 21, 9, 64, 12]
# node 0 is the pending token; parents index earlier nodes (a tree of 9 nodes, depth 4)
TREE_TOKENS = [40, 8, 77, 8, 19, 5, 33, 90, 2]
TREE_PARENTS = [-1, 0, 0, 1, 1, 2, 3, 6, 5]


def ancestor_mask(parents: list[int], size: int | None = None) -> torch.Tensor:
    """[size, size] bool: row t is True at t and at each ancestor of t; rows past the tree see themselves."""
    size = size or len(parents)
    mask = torch.eye(size, dtype=torch.bool)
    for t in range(len(parents)):
        p = parents[t]
        while p >= 0:
            mask[t, p] = True
            p = parents[p]
    return mask


def _close(a, b, tol=1e-5):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-6)) < tol


def _states_close(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        assert _close(a[key].float(), b[key].float()), key


def _path(parents, n):
    rows = []
    while n >= 0:
        rows.append(n)
        n = parents[n]
    return rows[::-1]


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_chain_forward_equals_single_token_forwards(family, hybrid_checkpoints):
    folder = hybrid_checkpoints[family]
    chain = [40, 8, 77, 19, 5]
    a, b = runner_for(folder), runner_for(folder)
    prefill(a, 0, PROMPT)
    prefill(b, 0, PROMPT)
    base = a.cache.lens[0]
    together = a.forward([0], torch.tensor([chain]), torch.arange(base, base + len(chain))[None])[0]
    one_by_one = feed(b, 0, chain[:3])
    assert _close(together[:3], one_by_one)
    a.cache.commit_prefix(0, 3)  # accept three of the five
    _states_close(committed_states(a, 0), committed_states(b, 0))
    nxt = feed(a, 0, [chain[3]])
    assert _close(nxt, feed(b, 0, [chain[3]]))
    _states_close(committed_states(a, 0), committed_states(b, 0))


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_tree_nodes_get_their_paths_logits(family, hybrid_checkpoints):
    folder = hybrid_checkpoints[family]
    runner = runner_for(folder, slots=1 + len(TREE_TOKENS))
    for slot in range(runner.cache.slots):
        prefill(runner, slot, PROMPT)
    base = runner.cache.lens[0]
    depths = []
    for p in TREE_PARENTS:
        depths.append(0 if p < 0 else depths[p] + 1)
    mask = ancestor_mask(TREE_PARENTS)[None]
    tree = runner.forward([0], torch.tensor([TREE_TOKENS]), (torch.tensor(depths) + base)[None], mask=mask)[0]
    for n in range(len(TREE_TOKENS)):
        path = [TREE_TOKENS[i] for i in _path(TREE_PARENTS, n)]
        sequential = feed(runner, 1 + n, path)
        assert _close(tree[n], sequential[-1]), f"{family}: node {n} (path {path})"


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
@pytest.mark.parametrize("node", [4, 7])
def test_commit_tree_node_then_continue(family, node, hybrid_checkpoints):
    folder = hybrid_checkpoints[family]
    runner, ref = runner_for(folder), runner_for(folder)
    prefill(runner, 0, PROMPT)
    prefill(ref, 0, PROMPT)
    base = runner.cache.lens[0]
    depths = []
    for p in TREE_PARENTS:
        depths.append(0 if p < 0 else depths[p] + 1)
    runner.forward([0], torch.tensor([TREE_TOKENS]), (torch.tensor(depths) + base)[None],
                   mask=ancestor_mask(TREE_PARENTS)[None])
    rows = _path(TREE_PARENTS, node)
    runner.cache.commit_path(0, rows)
    feed(ref, 0, [TREE_TOKENS[i] for i in rows])
    _states_close(committed_states(runner, 0), committed_states(ref, 0))
    assert runner.cache.lens[0] == ref.cache.lens[0]
    assert _close(feed(runner, 0, [11, 60]), feed(ref, 0, [11, 60]))


def test_batched_tree_forward_with_padding(hybrid_checkpoints):
    """Two requests with different prompts and trees of different sizes in one forward (the
    smaller padded, as the engine pads): each request's nodes get its own path's logits, and
    committing a node of the padded request leaves the state of feeding its path."""
    folder = hybrid_checkpoints["qwen3_5"]
    prompts = [PROMPT, PROMPT[:5]]
    runner = runner_for(folder, slots=2)
    for slot, prompt in enumerate(prompts):
        prefill(runner, slot, prompt)
    trees = [(TREE_TOKENS, TREE_PARENTS), ([6, 1, 2, 3], [-1, 0, 1, 0])]
    T = len(TREE_TOKENS)
    ids = torch.zeros(2, T, dtype=torch.long)
    pos = torch.zeros(2, T, dtype=torch.long)
    masks = []
    for b, (tok, par) in enumerate(trees):
        base = runner.cache.lens[b]
        depths = []
        for p in par:
            depths.append(0 if p < 0 else depths[p] + 1)
        ids[b, :len(tok)] = torch.tensor(tok)
        pos[b] = base
        pos[b, :len(tok)] = torch.tensor(depths) + base
        masks.append(ancestor_mask(par, T))
    out = runner.forward([0, 1], ids, pos, mask=torch.stack(masks))
    for b, (tok, par) in enumerate(trees):
        for n in range(len(tok)):
            fresh = runner_for(folder, slots=1)
            prefill(fresh, 0, prompts[b])
            assert _close(out[b, n], feed(fresh, 0, [tok[i] for i in _path(par, n)])[-1]), (b, n)
    tok, par = trees[1]
    runner.cache.commit_path(1, _path(par, 2))
    fresh = runner_for(folder, slots=1)
    prefill(fresh, 0, prompts[1])
    feed(fresh, 0, [tok[i] for i in _path(par, 2)])
    _states_close(committed_states(runner, 1), committed_states(fresh, 0))
