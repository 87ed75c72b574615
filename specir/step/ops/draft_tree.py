"""draft.tree @drafter, %ctx {depth, topk, budget, expand, threshold}: a token tree (EAGLE-2 style).

Semantics, in fixed shapes (K = topk): the drafter catches up; the root proposes its K best tokens
(candidates 0..K-1, score = draft log-probability); each further level feeds the K best candidates of
the previous level (by cumulative score, earlier candidate first on ties) to the drafter in one
forward at scratch rows, each proposing its K best children (candidates in creation order: frontier
position, then child rank). The tree keeps the `budget` best candidates overall (score, then
creation order), listed in creation order after node 0 (the pending token); a child's score never
exceeds its parent's, so every kept node's parent is kept. `expand = "dynamic"`: candidates whose
path probability is below `threshold` get score -inf; they are never expanded and the nodes they
fill are invalid (never accepted). With `off_at = N` > 0 and N or more live requests (host-known),
no drafter forward runs and every drafted node is invalid; the first step back on, the drafter
catches up on the tokens it skipped (catch_up.resync). With `topk_at = [k1, k2, ...]` (each 1 ..
topk) the tree is built with topk = k_b at b live requests (host-known; the last entry for more):
its level forwards feed k_b rows per request and rank k_b rows, and the nodes past its
k_b + (depth - 1) k_b^2 candidates are invalid (the width stays that of `topk`), so a draft that a
budget cuts to a few nodes per request costs what those nodes need (batch-fusion{narrow=true}
sets it). With `depth_at = [d1, d2, ...]` (each 1 .. depth) likewise the tree is `d_b` levels
deep at b live requests: d_b - 1 level forwards run, and the nodes past its candidates are invalid
(a budget under which one request keeps at most n nodes never keeps a node deeper than n, since a
child's score never exceeds its parent's: batch-fusion{narrow=true} sets d_b = min(depth, n), n
being a request's share of the budget split equally, the whole budget split by confidence). The op's forwards
and emission stay those of `topk` and `depth` (an upper bound on the narrower ones). The nodes carry their scores (confidence, read by batch.budget). Drafting is deterministic at every temperature (acceptance
samples over the candidates losslessly).
Candidates C = K + (depth - 1) K^2; width N = min(budget, C) drafted nodes (verify width N + 1);
depth `depth`. Forwards on @drafter: one catch-up of the emit width, depth - 1 of K tokens with a
tree mask over the (depth - 1) K fed rows.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from specir.acceptance_model import RANK_CAP, rank_tree, tree_accepted
from specir.ir.opdefs import MAX_DRAFT_TOKENS, MAX_TREE_BUDGET, AttrSpec, OpDef, TypeRuleError, in_range, register_op, symbol, value
from specir.ir.types import TREE
from specir.live_table import entry, trimmed
from specir.step.catch_up import catch_up, resync
from specir.step.emission import tree_emission
from specir.step.interfaces import ModelForward, StepInterfaces
from specir.step.values import Nodes

from .common import OFF_AT, model_of, model_vocab, off_variant

MAX_CANDIDATES = 1 << 16  # topk + (depth - 1) topk^2: the candidate table of one request


def candidates(op) -> int:
    a = op.attrs
    return a["topk"] + (a["depth"] - 1) * a["topk"] ** 2


def width(op, info=None) -> int:
    return min(op.attrs["budget"], candidates(op))


def _infer(op, ctx):
    mask = ctx.model_mask(op.operands[0])
    if mask is not None and mask != "tree":
        raise TypeRuleError(f"draft.tree runs {op.operands[0]} over tree nodes, so its graph needs mask<tree>, "
                            f"not mask<{mask}>", "the tree-verify pass rewrites both models' masks")
    a = op.attrs
    if a["depth"] < 1 or a["topk"] < 1 or a["budget"] < 1:
        raise TypeRuleError("depth, topk and budget must be at least 1", "e.g. {budget = 32, depth = 4, topk = 4}")
    for key, most in (("depth", MAX_DRAFT_TOKENS), ("topk", MAX_DRAFT_TOKENS), ("budget", MAX_TREE_BUDGET)):
        if a[key] > most:
            raise TypeRuleError(f"{key} must be at most {most}, got {a[key]}", "e.g. {budget = 32, depth = 4, topk = 4}")
    for d in a.get("depth_at") or ():
        if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= a["depth"]:
            raise TypeRuleError(f"depth_at entries must be integers between 1 and depth ({a['depth']}), got "
                                f"{list(a['depth_at'])}", "e.g. {depth = 6, depth_at = [6, 4]}")
    for k in a.get("topk_at") or ():
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= a["topk"]:
            raise TypeRuleError(f"topk_at entries must be integers between 1 and topk ({a['topk']}), got "
                                f"{list(a['topk_at'])}", "e.g. {topk = 4, topk_at = [4, 2, 1]}")
    vocab = model_vocab(ctx, op.operands[0])
    if vocab is not None and a["topk"] > vocab:
        raise TypeRuleError(f"topk {a['topk']} is more than the drafter's vocabulary of {vocab} tokens",
                            "topk is the number of children per node, at most the vocabulary size")
    if candidates(op) > MAX_CANDIDATES:
        raise TypeRuleError(f"a tree of depth {a['depth']} and topk {a['topk']} has {candidates(op)} candidates per "
                            f"step; at most {MAX_CANDIDATES}", "lower depth or topk (candidates: topk + (depth - 1) "
                                                               "topk^2)")
    return TREE


def _forwards(op, info):
    d, a, W = model_of(op), op.attrs, info.emit_width
    out = [ModelForward(d, W, 1, "catch-up", W, ranked=1)]
    if a["depth"] > 1:
        fed = (a["depth"] - 1) * a["topk"]
        out.append(ModelForward(d, a["topk"], a["depth"] - 1, "tree-level", W + fed, mask_width=fed,
                                ranked=a["topk"]))
    return out


class TreeState:
    """The candidate table of one batch, in fixed shapes (see the module docstring). `expand` is its
    one update (StepBackend.expand_tree's torch semantics; a backend's kernel matches it table for
    table)."""

    TABLES = ("score", "token", "parent", "cand_depth", "fed_row", "row_mask", "frontier")  # what expand writes

    def __init__(self, B: int, depth: int, topk: int, budget: int, device, log_min: float, width: int | None = None):
        K = topk
        self.B, self.depth, self.K, self.log_min = B, depth, K, log_min
        self.C = K + (depth - 1) * K * K
        self.N = min(budget, self.C)
        self.width = max(width or self.N, self.N)  # nodes listed; past N invalid (a narrower tree of a wider op)
        self.U = max((depth - 1) * K, 1)
        z = lambda *shape, dtype: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        self.score = z(B, self.C, dtype=torch.float32)
        self.token = z(B, self.C, dtype=torch.long)
        self.parent = z(B, self.C, dtype=torch.long)
        self.cand_depth = z(B, self.C, dtype=torch.long)
        self.fed_row = z(B, self.C, dtype=torch.long)
        self.row_mask = z(B, self.U, self.U, dtype=torch.bool)
        self.frontier = z(B, K, dtype=torch.long)
        self.arange_k = torch.arange(K, device=device)
        self.eye_k = torch.eye(K, dtype=torch.bool, device=device)
        self.node_numbers = torch.arange(1, self.N + 1, device=device)[None, :].expand(B, self.N).contiguous()
        self.eye_n = torch.eye(self.width + 1, dtype=torch.bool, device=device)[None].expand(B, -1, -1).contiguous()

    def base(self, level: int) -> int:
        """The first candidate of `level` (0: the root's children)."""
        return 0 if level == 0 else self.K + (level - 1) * self.K * self.K

    def expand(self, level: int, vals: torch.Tensor, toks: torch.Tensor, feed) -> None:
        """Level `level`'s candidates from the drafter's ranked children (level 0: the root's, vals and
        toks [B, K]; else the frontier's, [B, K, K]) and the new frontier; then with `feed` (the level
        forward's ForwardInputs) the next level's inputs: its ids, tree mask [B, K, U] (the frontier
        fed at rows level K + t), offsets (level K) and positions (lens + level)."""
        if level == 0:
            self._root(vals, toks)
        else:
            self._propose(level, vals, toks)
        if feed is not None:
            self._level_inputs(level + 1, feed.ids, feed.mask)
            feed.offsets.fill_(level * self.K)
            feed.pos.copy_((feed.lens.long()[:, None] + level).expand(-1, self.K))

    def _pruned(self, scores: torch.Tensor) -> torch.Tensor:
        """Scores below log_min as -inf; a NaN score (a row of the drafter's logits with no finite
        entry) as -inf too, at every log_min, so it never takes a place in the frontier or the budget."""
        return torch.where(scores >= self.log_min, scores, -math.inf)

    def _root(self, vals: torch.Tensor, toks: torch.Tensor) -> None:
        K = self.K
        self.score[:, :K] = self._pruned(vals)
        self.token[:, :K] = toks
        self.parent[:, :K] = -1
        self.cand_depth[:, :K] = 1
        self.frontier.copy_(self.arange_k[None, :].expand(self.B, K))

    def _level_inputs(self, level: int, ids: torch.Tensor, mask: torch.Tensor) -> None:
        """ids [B, K] and mask [B, K, U] of the level forward (frontier fed at rows (level-1)K + t)."""
        K, first = self.K, (level - 1) * self.K
        f = self.frontier
        ids.copy_(self.token.gather(1, f))
        parent = self.parent.gather(1, f)
        parent_row = self.fed_row.gather(1, parent.clamp(min=0))
        inherited = self.row_mask.gather(1, parent_row[:, :, None].expand(-1, -1, self.U))
        rows = inherited & (parent >= 0)[:, :, None]
        rows[:, :, first:first + K] |= self.eye_k
        mask.copy_(rows)
        self.row_mask[:, first:first + K] = rows
        self.fed_row.scatter_(1, f, self.arange_k[None, :].expand(self.B, K) + first)

    def _propose(self, level: int, vals: torch.Tensor, toks: torch.Tensor) -> None:
        K = self.K
        base = self.base(level)
        scores = self._pruned((self.score.gather(1, self.frontier)[:, :, None] + vals).reshape(self.B, K * K))
        self.score[:, base:base + K * K] = scores
        self.token[:, base:base + K * K] = toks.reshape(self.B, K * K)
        self.parent[:, base:base + K * K] = self.frontier[:, :, None].expand(-1, -1, K).reshape(self.B, K * K)
        self.cand_depth[:, base:base + K * K] = level + 1
        order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :K]
        self.frontier.copy_(order + base)

    def nodes(self, pending: torch.Tensor) -> Nodes:
        N = self.N
        chosen = torch.sort(self.score, dim=1, descending=True, stable=True).indices[:, :N]
        chosen = torch.sort(chosen, dim=1).values
        node_of = torch.zeros_like(self.parent)
        node_of.scatter_(1, chosen, self.node_numbers)
        cand_parent = self.parent.gather(1, chosen)
        parent_node = torch.where(cand_parent >= 0, node_of.gather(1, cand_parent.clamp(min=0)), 0)
        tokens = torch.cat([pending[:, None], self.token.gather(1, chosen)], dim=1)
        parents = torch.cat([torch.full_like(parent_node[:, :1], -1), parent_node], dim=1).to(torch.int32)
        depths = torch.cat([torch.zeros_like(parent_node[:, :1]), self.cand_depth.gather(1, chosen)], dim=1)
        valid = torch.cat([torch.ones_like(chosen[:, :1], dtype=torch.bool),
                           self.score.gather(1, chosen) > -math.inf], dim=1)
        score = torch.cat([torch.zeros_like(self.score[:, :1]), self.score.gather(1, chosen)], dim=1)
        pad = self.width - N
        if pad:  # invalid children of the root, never verified by a packed verify nor accepted
            tokens = torch.cat([tokens, tokens.new_zeros(self.B, pad)], dim=1)
            parents = torch.cat([parents, parents.new_zeros(self.B, pad)], dim=1)
            depths = torch.cat([depths, depths.new_ones(self.B, pad)], dim=1)
            valid = torch.cat([valid, valid.new_zeros(self.B, pad)], dim=1)
            score = torch.cat([score, score.new_full((self.B, pad), -math.inf)], dim=1)
        up = parents.long().clamp(min=0)[:, :, None].expand(-1, -1, self.width + 1)
        anc = self.eye_n.clone()
        for _ in range(self.depth):
            anc = self.eye_n | anc.gather(1, up)
        return Nodes(tokens, parents, depths, valid, anc, max_depth=self.depth, max_children=self.K, score=score)


def topk_now(op, live: int) -> int:
    """The children per node this step builds with `live` requests decoding (topk_at, else topk)."""
    table = op.attrs.get("topk_at")
    return entry(table, live) if table else op.attrs["topk"]


def depth_now(op, live: int) -> int:
    """The levels this step builds with `live` requests decoding (depth_at, else depth)."""
    table = op.attrs.get("depth_at")
    return entry(table, live) if table else op.attrs["depth"]


def _shapes(op, B: int) -> set[tuple[int, int]]:
    """(children per node, levels) of every tree the op builds at 1 .. B live requests."""
    return {(op.attrs["topk"], op.attrs["depth"])} | {(topk_now(op, b), depth_now(op, b)) for b in range(1, B + 1)}


def setup(ctx, op) -> None:
    a = op.attrs
    threshold = float(a.get("threshold", 0.0))
    log_min = math.log(threshold) if a.get("expand", "static") == "dynamic" and threshold > 0 else -math.inf
    ctx.op_state[id(op)] = {(k, d): TreeState(ctx.B, d, k, a["budget"], ctx.device, log_min, width(op))
                            for k, d in sorted(_shapes(op, ctx.B))}


def at_live(op, live: int):
    """The op as it drafts with `live` requests decoding: topk_at's and depth_at's entries as its
    topk and depth."""
    if not op.attrs.get("topk_at") and not op.attrs.get("depth_at"):
        return op
    return dataclasses.replace(op, attrs=op.attrs.set(topk=topk_now(op, live), depth=depth_now(op, live),
                                                      topk_at=None, depth_at=None))


def _variant(ctx, op):
    """(drafting mode: off_variant's, children per node: topk_now, levels: depth_now), host-known."""
    live = ctx.live_requests()
    return off_variant(ctx, op), topk_now(op, live), depth_now(op, live)


def narrow(op, info, alpha: float, nodes_by_live: list[int], deepest_by_live: list[int] | None = None) -> dict:
    """topk_at and depth_at for a budget that keeps nodes_by_live[b - 1] nodes per request at b
    live (its share), one request at most deepest_by_live[b - 1] (default: the share): at each size
    the fewest children per node whose tree's most probable n nodes are as likely (the emission
    model, specir/step/emission.py) as the full tree's, and min(depth, most) levels (the most
    nodes a request keeps are never deeper than that many); each {} where it is topk / depth everywhere."""
    a = op.attrs
    depth, topk, full = a["depth"], a["topk"], width(op)
    best = tree_emission(alpha, depth, topk, full)
    children, levels = [], []
    for n, most in zip(nodes_by_live, deepest_by_live or nodes_by_live):
        n = max(1, min(n, full))
        children.append(next(k for k in range(1, topk + 1)
                             if k == topk or tree_emission(alpha, depth, k, n)[n] >= best[n] - 1e-12))
        levels.append(min(depth, max(1, most)))
    children, levels = trimmed(children), trimmed(levels)
    out = {} if all(k == topk for k in children) else {"topk_at": tuple(children)}
    return out if all(d == depth for d in levels) else {**out, "depth_at": tuple(levels)}


def accepted(op, profile):
    """The acceptance model's rule: the tree this op would build from the pair's acceptance by
    sibling rank (static, or dynamic with its threshold) accepts the longest rank path it holds."""
    a = op.attrs
    threshold = float(a.get("threshold", 0.0)) if a.get("expand", "static") == "dynamic" else 0.0
    tree = rank_tree(profile.acceptance_by_rank(RANK_CAP), int(a["depth"]), int(a["topk"]), int(a["budget"]),
                     threshold)
    return lambda s, i: tree_accepted(s.ranks, i, tree)


def lower(ctx, op, args):
    state = ctx.state(model_of(op), "draft")
    mode, k, d = ctx.variants.get(id(op), ("on", op.attrs["topk"], op.attrs["depth"]))
    tree: TreeState = ctx.op_state[id(op)][(k, d)]
    if mode == "off":
        nodes = ctx.backend.tree_nodes(tree, ctx.pending)
        nodes.valid = nodes.valid & (nodes.depths == 0)
        return nodes
    K, rank, expand = tree.K, ctx.backend.top_log_probs, ctx.backend.expand_tree
    inputs = forward = None
    if tree.depth > 1:
        inputs, forward = ctx.forward(state, ("tree-level", K, tree.depth), K, mask_width=tree.U, offsets=True)
    logits = catch_up(ctx, state) if mode == "on" else resync(ctx, state)
    expand(tree, 0, *rank(logits, K), inputs)
    for level in range(1, tree.depth):
        expand(tree, level, *rank(forward.run(), K), inputs if level + 1 < tree.depth else None)
    return ctx.backend.tree_nodes(tree, ctx.pending)


register_op(OpDef(
    "draft.tree", "step", (symbol("drafter"), value("ctx", "context")),
    {"depth": AttrSpec("int", doc="maximum tree depth (drafted tokens on a path)"),
     "topk": AttrSpec("int", doc="children considered per node"),
     "budget": AttrSpec("int", doc="drafted nodes per step (the verify width is min(budget, candidates) + 1)"),
     "expand": AttrSpec("str", "static", choices=("static", "dynamic"),
                        doc="static: best-first by cumulative draft probability up to the budget; "
                            "dynamic: also drop candidates whose path probability is below `threshold`"),
     "threshold": AttrSpec("float", 0.0, doc="dynamic expansion: minimum path probability", valid=in_range(0, 1)),
     "off_at": OFF_AT,
     "topk_at": AttrSpec("list", (), doc="children per node by live batch size (entry b - 1 at b live requests, "
                                         "the last beyond); empty: topk at every size"),
     "depth_at": AttrSpec("list", (), doc="levels by live batch size (entry b - 1 at b live requests, the last "
                                          "beyond); empty: depth at every size")},
    _infer, doc="A token tree: static top-k expansion or dynamic by draft confidence.", role="draft",
    step=StepInterfaces(width=width, depth=lambda op, info: op.attrs["depth"], forwards=_forwards, lower=lower,
                        setup=setup, effects=("draft",), backend_calls=("top_log_probs", "expand_tree", "tree_nodes"),
                        variant=_variant, accepted=accepted, narrow=narrow, at_live=at_live,
                        emission=lambda op, info, alpha, order: tree_emission(
                            alpha, op.attrs["depth"], op.attrs["topk"], width(op), order))))
