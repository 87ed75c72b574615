"""Drafters: a model drafting a chain or a token tree, and n-gram prompt lookup.

A model drafter first catches up (feeds the committed tokens its cache lacks plus the pending
token, promoting them), then drafts into scratch rows that the next step overwrites.
"""
from __future__ import annotations

import heapq

import torch

from .tree_mask import ancestor_mask
from .values import ChainDraft, TreeDraft


def catch_up(runner, requests, state) -> torch.Tensor:
    """Bring the drafter's cache up to each request's tokens (pending included).
    Returns the drafter's logits after the pending token, [B, V]."""
    slots, feeds = [], []
    for r in requests:
        have = state.drafter_tokens.setdefault((runner.model.name, r.slot), [])
        common = 0
        limit = min(len(have), len(r.tokens) - 1)  # always re-feed at least the pending token
        while common < limit and have[common] == r.tokens[common]:
            common += 1
        runner.cache.truncate(r.slot, common)
        runner.cache.lens[r.slot] = common
        feeds.append(r.tokens[common:])
        slots.append(r.slot)
    T = max(len(f) for f in feeds)
    ids = torch.zeros(len(requests), T, dtype=torch.long)
    pos = torch.zeros(len(requests), T, dtype=torch.long)
    for b, f in enumerate(feeds):
        start = runner.cache.lens[slots[b]]
        ids[b, :len(f)] = torch.tensor(f)
        pos[b] = torch.arange(start, start + T)
    logits = runner.forward(slots, ids.to(runner.device), pos.to(runner.device))
    last = torch.stack([logits[b, len(f) - 1] for b, f in enumerate(feeds)])
    for b, r in enumerate(requests):
        runner.cache.commit_prefix(r.slot, len(feeds[b]))
        state.drafter_tokens[(runner.model.name, r.slot)] = list(r.tokens)
    return last


def draft_chain(runner, requests, k: int, state) -> ChainDraft:
    """k tokens per request: greedy at temperature 0, else sampled from q = softmax(logits / T)."""
    logits = catch_up(runner, requests, state)
    tokens = [[] for _ in requests]
    qs = [[] for _ in requests]
    sampled = state.temperature > 0
    slots = [r.slot for r in requests]
    for i in range(k):
        if sampled:
            q = torch.softmax(logits.float() / state.temperature, dim=-1)
            nxt = torch.multinomial(q.cpu(), 1, generator=state.generator)[:, 0]
            for b in range(len(requests)):
                qs[b].append(q[b].cpu())
        else:
            nxt = logits.argmax(-1).cpu()
        for b in range(len(requests)):
            tokens[b].append(int(nxt[b]))
        if i + 1 < k:
            ids = nxt.view(-1, 1).to(runner.device)
            pos = torch.tensor([[runner.cache.lens[s] + i] for s in slots], device=runner.device)
            logits = runner.forward(slots, ids, pos, offsets=[i] * len(slots))[:, 0]
    q = [torch.stack(x) if x else None for x in qs] if sampled else [None] * len(requests)
    return ChainDraft(tokens, q)


def draft_ngram(requests, k: int, max_ngram: int, min_ngram: int) -> ChainDraft:
    """Continue the most recent earlier occurrence of the longest matching suffix (prompt lookup)."""
    out = []
    for r in requests:
        seq = r.tokens
        proposal: list[int] = []
        for n in range(min(max_ngram, len(seq) - 1), min_ngram - 1, -1):
            suffix = seq[-n:]
            for start in range(len(seq) - n - 1, -1, -1):
                if seq[start:start + n] == suffix:
                    proposal = seq[start + n:start + n + k]
                    break
            if proposal:
                break
        out.append(list(proposal))
    return ChainDraft(out, [None] * len(requests))


def draft_tree(runner, requests, depth: int, topk: int, budget: int, state, *, expand: str = "static",
               threshold: float = 0.0) -> TreeDraft:
    """Best-first token trees (EAGLE-2 style): each level expands the `topk` best candidates by
    cumulative draft log-probability, each proposing its `topk` best children; the tree keeps the
    `budget` best candidates overall. Dynamic expansion also drops candidates whose path
    probability is under `threshold`."""
    logits = catch_up(runner, requests, state)
    B = len(requests)
    log_min = float("-inf") if expand == "static" or threshold <= 0 else float(torch.log(torch.tensor(threshold)))
    # candidate: (score, creation, token, parent candidate id or -1 for the root)
    cands: list[list[tuple]] = [[] for _ in range(B)]
    frontier: list[list[int]] = [[] for _ in range(B)]  # candidate ids expanded at this level

    def propose(b, logp_row, parent_id, parent_score):
        vals, idx = torch.topk(logp_row, topk)
        for v, t in zip(vals.tolist(), idx.tolist()):
            score = parent_score + v
            if score >= log_min:
                cands[b].append((score, len(cands[b]), t, parent_id))

    logp = torch.log_softmax(logits.float(), dim=-1).cpu()
    for b in range(B):
        propose(b, logp[b], -1, 0.0)
    fed: list[list[int]] = [[] for _ in range(B)]  # candidate ids in the drafter's scratch rows, in order
    slots = [r.slot for r in requests]
    for level in range(1, depth):
        for b in range(B):
            level_cands = [c for c in cands[b] if _depth(cands[b], c[1]) == level]
            frontier[b] = [c[1] for c in heapq.nlargest(topk, level_cands, key=lambda c: (c[0], -c[1]))]
        T = max((len(f) for f in frontier), default=0)
        if T == 0:
            break
        offsets = [len(f) for f in fed]
        U = max(offsets) + T
        ids = torch.zeros(B, T, dtype=torch.long)
        pos = torch.zeros(B, T, dtype=torch.long)
        mask = torch.zeros(B, T, U, dtype=torch.bool)
        for b in range(B):
            base = runner.cache.lens[slots[b]]
            for t in range(T):
                mask[b, t, offsets[b] + t] = True
            for t, cid in enumerate(frontier[b]):
                ids[b, t] = cands[b][cid][2]
                pos[b, t] = base + level - 1
                anc = cands[b][cid][3]
                while anc >= 0:
                    mask[b, t, fed[b].index(anc)] = True
                    anc = cands[b][anc][3]
            fed[b] += frontier[b] + [-1] * (T - len(frontier[b]))
        out = runner.forward(slots, ids.to(runner.device), pos.to(runner.device), offsets=offsets,
                             mask=mask.to(runner.device))
        logp = torch.log_softmax(out.float(), dim=-1).cpu()
        for b in range(B):
            for t, cid in enumerate(frontier[b]):
                propose(b, logp[b, t], cid, cands[b][cid][0])
    tokens, parents = [], []
    for b, r in enumerate(requests):
        chosen = heapq.nlargest(budget, cands[b], key=lambda c: (c[0], -c[1]))
        chosen_ids = sorted(c[1] for c in chosen)
        node_of: dict[int, int] = {}
        toks, pars = [r.tokens[-1]], [-1]
        for cid in chosen_ids:
            parent = cands[b][cid][3]
            if parent >= 0 and parent not in node_of:
                continue  # an ancestor fell outside the budget (equal scores): drop the orphan
            node_of[cid] = len(toks)
            toks.append(cands[b][cid][2])
            pars.append(0 if parent < 0 else node_of[parent])
        tokens.append(toks)
        parents.append(pars)
    return TreeDraft(tokens, parents)


def _depth(cands, cid) -> int:
    d = 1
    parent = cands[cid][3]
    while parent >= 0:
        d += 1
        parent = cands[parent][3]
    return d


__all__ = ["catch_up", "draft_chain", "draft_ngram", "draft_tree", "ancestor_mask"]
