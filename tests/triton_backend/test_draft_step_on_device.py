"""The Triton step drafts through its kernels, not torch: a tree build ranks with
kernels/ranking.py, expands each level with kernels/tree_expand.py, lists its nodes with
kernels/tree_nodes.py and compacts every layer's KV in one kv_compact per layer shape; a chain
build scores its tokens with the ranking kernel's log_prob_of. Both stay lossless (token forcing)."""
from __future__ import annotations

from collections import Counter

from specir.backends.triton.kernels import kv_cache, ranking, tree_expand, tree_nodes
from specir.runtime.session import make_engine
from tests.triton_backend.pipelines import PROMPTS, forced, pipeline


def counting(monkeypatch, calls, module, name):
    real = getattr(module, name)

    def wrapped(*args, **kwargs):
        calls[f"{module.__name__.rsplit('.', 1)[-1]}.{name}"] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, wrapped)


def test_a_tree_step_drafts_and_commits_through_the_kernels(tiny_pair, device, monkeypatch):
    calls = Counter()
    for module, name in ((ranking, "top_log_probs"), (tree_expand, "expand_tree"), (tree_nodes, "tree_nodes"),
                         (kv_cache, "kv_compact")):
        counting(monkeypatch, calls, module, name)
    monkeypatch.setattr("specir.backends.triton.step_backend.kv_compact", kv_cache.kv_compact)
    target, drafter = tiny_pair
    p = pipeline("tree", target, drafter)  # depth 2, topk 2: a root ranking and one level per step
    engine = make_engine(p, "triton", device, None)
    results = engine.generate(PROMPTS, 5)
    report = forced(p, target, PROMPTS, [r.tokens for r in results])
    assert report.checked == 10 and report.mismatches == 0, report.as_dict()
    steps = calls["tree_nodes.tree_nodes"]
    assert steps >= 1
    assert calls["ranking.top_log_probs"] == 2 * steps and calls["tree_expand.expand_tree"] == 2 * steps
    assert calls["kv_cache.kv_compact"] == steps  # the target's layers are of one shape: one launch a verify


def test_a_chain_scores_its_tokens_with_the_ranking_kernel(tiny_pair, device, monkeypatch):
    calls = Counter()
    counting(monkeypatch, calls, ranking, "log_prob_of")
    target, drafter = tiny_pair
    p = pipeline("chain", target, drafter)  # k = 2
    engine = make_engine(p, "triton", device, None)
    results = engine.generate(PROMPTS[:1], 4)
    report = forced(p, target, PROMPTS[:1], [r.tokens for r in results])
    assert report.mismatches == 0 and calls["ranking.log_prob_of"] >= 2
