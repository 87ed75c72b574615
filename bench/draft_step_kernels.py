"""The draft step's bookkeeping on the device: torch against the Triton kernels that replace it.

    python bench/draft_step_kernels.py [--vocab 128256] [--topk 8] [--depth 6] [--budget 64]
                                       [--batch-sizes 1,8,64] [--out FILE.json]

For each batch size B, each as the Triton backend runs it inside draft.tree / draft.chain:
- rank: top-k log-probabilities of a tree level's B x topk rows of bf16 logits (the root: B rows),
  torch (specir/step/ranking.py: a radix top-k, max, exp, sum) against kernels/ranking.py;
- log-prob: one token's log-probability per row (draft.chain), likewise;
- expand: one tree level's update and the next level's inputs, TreeState.expand against
  kernels/tree_expand.py;
- nodes: the drafted nodes and their ancestor mask, TreeState.nodes against kernels/tree_nodes.py;
- kv-compact: the tree verify's KV compaction of `--layers` layers (8 KV heads x 128, a 1024-row
  cache, an accepted path of depth nodes out of a budget + 1 verify), one kv_compact per layer against
  one over the stacked layers (KVCache.stacks).
Each row checks that both give the same result (ranking: the same logits ranked; the tree: equal
tables) and times both as CUDA-graph replays (microseconds a call, the median of 5 x 50); the
per-step figure multiplies by the calls a depth-`depth` tree makes (depth rankings, each priced as
a level's B x topk rows though the root's are B; depth expands; one nodes). Off a GPU
(TRITON_INTERPRET=1) it only checks; the exit status is 1 if a check fails.
"""
import argparse
import copy
import json
import math
import sys
from types import SimpleNamespace

import _checkout  # noqa: F401
import torch

from specir.backends.triton.kernels import ranking as kernel_ranking
from specir.backends.triton.kernels.kv_cache import kv_compact
from specir.backends.triton.kernels.tree_expand import expand_tree
from specir.backends.triton.kernels.tree_nodes import tree_nodes
from specir.step import ranking as torch_ranking
from specir.step.ops.draft_tree import TreeState
from timing import replay_us


def grown_tree(B, depth, K, budget, device):
    """A tree after `depth` levels of random rankings, and the feed its last level wrote."""
    tree = TreeState(B, depth, K, budget, device, -math.inf)
    feed = SimpleNamespace(ids=torch.zeros(B, K, dtype=torch.long, device=device),
                           pos=torch.zeros(B, K, dtype=torch.long, device=device),
                           offsets=torch.zeros(B, dtype=torch.int32, device=device),
                           mask=torch.zeros(B, K, tree.U, dtype=torch.bool, device=device),
                           lens=torch.full((B,), 100, dtype=torch.int32, device=device))
    for level in range(depth):
        rows = 1 if level == 0 else K
        vals = torch.sort(-torch.rand(B, rows, K, device=device) * 5, dim=-1, descending=True).values
        toks = torch.randint(0, 1000, (B, rows, K), device=device)
        if level == 0:
            vals, toks = vals[:, 0], toks[:, 0]
        tree.expand(level, vals, toks, feed if level + 1 < depth else None)
    return tree, feed


def tables(tree):
    return [getattr(tree, name).clone() for name in TreeState.TABLES]


def run(args) -> list[dict]:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    K, depth = args.topk, args.depth
    rows_out = []
    for B in args.batch_sizes:
        logits = (3 * torch.randn(B, K, args.vocab, device=device)).to(torch.bfloat16)
        want = torch_ranking.top_log_probs(logits, K)
        got = kernel_ranking.top_log_probs(logits, K)
        same = torch.equal(logits.gather(-1, want[1]), logits.gather(-1, got[1]))
        err = float((want[0] - got[0]).abs().max())
        rows_out.append({"what": "rank", "B": B, "rows": B * K, "same": same, "max_abs_err": round(err, 5),
                         "torch_us": replay_us(lambda: torch_ranking.top_log_probs(logits, K)),
                         "triton_us": replay_us(lambda: kernel_ranking.top_log_probs(logits, K))})
        token = torch.randint(0, args.vocab, (B,), device=device)
        row = logits[:, 0]
        err = float((torch_ranking.log_prob_of(row, token) - kernel_ranking.log_prob_of(row, token)).abs().max())
        rows_out.append({"what": "log-prob", "B": B, "rows": B, "same": err < 5e-3, "max_abs_err": round(err, 5),
                         "torch_us": replay_us(lambda: torch_ranking.log_prob_of(row, token)),
                         "triton_us": replay_us(lambda: kernel_ranking.log_prob_of(row, token))})
        rows_out.append(_expand_row(B, K, depth, args.budget, device))
        tree, feed = grown_tree(B, depth, K, args.budget, device)
        rows_out.append({"what": "nodes", "B": B, "rows": tree.width + 1,
                         "same": all(torch.equal(getattr(tree.nodes(feed.ids[:, 0]), f), getattr(
                             tree_nodes(tree, feed.ids[:, 0]), f)) for f in ("tokens", "parents", "depths", "valid",
                                                                            "mask", "score")),
                         "torch_us": replay_us(lambda: tree.nodes(feed.ids[:, 0])),
                         "triton_us": replay_us(lambda: tree_nodes(tree, feed.ids[:, 0]))})
        rows_out.append(_kv_compact_row(B, depth, args.budget, args.layers, device))
    return rows_out


def _kv_compact_row(B, depth, budget, layers, device) -> dict:
    """Per-layer compaction ("torch_us": the launches the step made before the stack) against one
    launch over the stack ("triton_us"), on the same caches; checked equal after one of each."""
    shape = (layers, B, 8, 1024, 128) if device == "cuda" else (layers, B, 2, 64, 16)
    k, v = torch.randn(*shape, device=device).to(torch.bfloat16), torch.randn(*shape, device=device).to(torch.bfloat16)
    lens = torch.full((B,), 100 if device == "cuda" else 10, dtype=torch.int32, device=device)
    path = torch.sort(torch.randperm(budget, device=device)[:depth]).values.to(torch.int32)
    path = torch.cat([torch.zeros(1, dtype=torch.int32, device=device), path[path > 0]])[None].expand(B, -1).contiguous()
    n = torch.full((B,), path.shape[1], dtype=torch.int32, device=device)
    k2, v2 = k.clone(), v.clone()
    for layer in range(layers):
        kv_compact(k[layer], v[layer], lens, path, n)
    kv_compact(k2, v2, lens, path, n)
    return {"what": "kv-compact", "B": B, "rows": layers, "same": torch.equal(k, k2) and torch.equal(v, v2),
            "torch_us": replay_us(lambda: [kv_compact(k[i], v[i], lens, path, n) for i in range(layers)]),
            "triton_us": replay_us(lambda: kv_compact(k2, v2, lens, path, n))}


def _expand_row(B, K, depth, budget, device) -> dict:
    """A middle level's expansion with the next level's inputs, on two copies of one grown tree:
    torch and the kernel write the same tables and inputs; each is then timed on its own copy
    (re-running a level rewrites the same slots)."""
    level = max(1, depth - 2)
    by_torch, feed_t = grown_tree(B, depth, K, budget, device)
    by_kernel, feed_k = copy.deepcopy((by_torch, feed_t))
    vals = torch.sort(-torch.rand(B, K, K, device=device) * 5, dim=-1, descending=True).values
    toks = torch.randint(0, 1000, (B, K, K), device=device)
    by_torch.expand(level, vals, toks, feed_t)
    expand_tree(by_kernel, level, vals, toks, feed_k)
    same = all(torch.equal(a, b) for a, b in zip(tables(by_torch), tables(by_kernel)))
    same = same and all(torch.equal(getattr(feed_t, n), getattr(feed_k, n)) for n in ("ids", "pos", "offsets", "mask"))
    return {"what": "expand", "B": B, "rows": K * K, "same": same,
            "torch_us": replay_us(lambda: by_torch.expand(level, vals, toks, feed_t)),
            "triton_us": replay_us(lambda: expand_tree(by_kernel, level, vals, toks, feed_k))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--topk", type=int, default=8)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--budget", type=int, default=64)
    parser.add_argument("--layers", type=int, default=32, help="the target's layers (KV compaction)")
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 64])
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    rows = run(args)
    calls = {"rank": args.depth, "expand": args.depth, "nodes": 1, "log-prob": 0, "kv-compact": 1}
    for B in args.batch_sizes:
        mine = [r for r in rows if r["B"] == B and r["torch_us"] is not None]
        if mine:
            rows.append({"what": "per tree step", "B": B, "same": all(r["same"] for r in rows if r["B"] == B),
                         "torch_us": round(sum(calls[r["what"]] * r["torch_us"] for r in mine), 1),
                         "triton_us": round(sum(calls[r["what"]] * r["triton_us"] for r in mine), 1)})
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    print(f"{'what':<14} {'B':>3} {'rows':>6} {'same':>5} {'torch us':>9} {'triton us':>9}")
    for r in rows:
        print(f"{r['what']:<14} {r['B']:>3} {r.get('rows', ''):>6} {str(r['same']):>5} "
              f"{r['torch_us'] if r['torch_us'] is not None else '-':>9} "
              f"{r['triton_us'] if r['triton_us'] is not None else '-':>9}")
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
