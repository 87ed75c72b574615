"""The decode step on the device: draft, verify, greedy acceptance and commit as one launch
sequence over persistent tensors (capturable into one CUDA graph; no host read inside).

State per request b (all device tensors, B fixed): `t_lens[b]`/`d_lens[b]` committed rows of
the target / drafter cache, `pending[b]` the pending token (not yet in the target cache),
`feed[b, :n_feed[b]]` the tokens the drafter has not seen (last step's emitted tokens),
`active[b]` (0 freezes a finished request: nothing is committed for it). After `run()`,
`readback[b, :Tv]` holds the emitted tokens (accepted drafts then the bonus, -1 after) and
`readback[b, Tv]` their number: the one tensor the host copies per step.

Semantics per schedule (docs/KERNEL_CONTRACTS.md "Greedy acceptance over a tree"):
- drafter catch-up (chain, tree): feed rows d_lens + t, then d_lens += n_feed; the drafter's
  logits after the pending token are those of feed row n_feed - 1;
- chain: k - 1 more drafter forwards of one token at scratch offsets 0 .. k-2 (greedy drafts);
- n-gram: drafts are written into `ids[:, 1:]` by the host before `run()` (-1 = none);
- tree: tree_draft.TreeDrafter levels, then the tree verify with its ancestor mask;
- verify: target forward over [pending, drafts] at rows t_lens + t (positions t_lens + depth),
  argmax, greedy acceptance, KV compaction of the accepted path when commit says `compact`,
  t_lens += n_acc, pending = bonus.
"""
from __future__ import annotations

import torch

from .forward import ForwardInputs
from .kernels.accept import greedy_accept_tree
from .kernels.argmax import argmax
from .kernels.kv_cache import kv_compact
from .schedule import Schedule
from .tree_draft import TreeDrafter


class StepState:
    """The per-request device state shared by every captured step of a session."""

    def __init__(self, B: int, feed_width: int, device):
        z = lambda *shape, dtype=torch.long: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        self.t_lens, self.d_lens = z(B, dtype=torch.int32), z(B, dtype=torch.int32)
        self.pending, self.active = z(B), z(B, dtype=torch.int32)
        self.feed = torch.full((B, feed_width), -1, dtype=torch.long, device=device)
        self.n_feed = z(B, dtype=torch.int32)

    def reset(self) -> None:
        for t in (self.t_lens, self.d_lens, self.pending, self.active, self.n_feed):
            t.zero_()
        self.feed.fill_(-1)


class DeviceStep:
    def __init__(self, schedule: Schedule, target, drafter, t_cache, d_cache, state: StepState, device, *,
                 verify_width: int | None = None):
        """target/drafter: CompiledModel (drafter None without one); verify_width overrides the
        schedule's (n-gram steps with no proposal verify one token)."""
        s = schedule
        B = state.t_lens.shape[0]
        self.schedule, self.B, self.device, self.state = s, B, device, state
        self.target, self.drafter = target, drafter
        self.t_cache, self.d_cache = t_cache, d_cache
        z = lambda *shape, dtype=torch.long: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        Tv = verify_width or s.verify_width
        self.Tv = Tv
        self.t_lens, self.d_lens, self.pending, self.active = state.t_lens, state.d_lens, state.pending, state.active
        self.feed, self.n_feed = state.feed, state.n_feed
        F = self.feed.shape[1]
        self.readback = z(B, Tv + 1)
        self.arange_v = torch.arange(Tv, device=device)
        self.arange_f = torch.arange(F, device=device)
        # verify forward
        tree = s.kind == "tree"
        self.v_in = ForwardInputs(z(B, Tv), z(B, Tv), self.t_lens,
                                  mask=z(B, Tv, Tv, dtype=torch.bool) if tree else None)
        self.verify = target.forward(t_cache, self.v_in)
        self.v_parents = (self.arange_v - 1).to(torch.int32)[None, :].expand(B, Tv).contiguous()
        self.v_depth = self.arange_v[None, :].expand(B, Tv).contiguous()
        self.v_arg = z(B, Tv)
        self.acc_idx, self.n_acc = z(B, Tv, dtype=torch.int32), z(B, dtype=torch.int32)
        self.bonus, self.emitted = z(B), z(B, Tv)
        self.argmax_ws = None
        # drafter forwards
        if drafter is not None:
            self.cu_in = ForwardInputs(self.feed, z(B, F), self.d_lens)
            self.catch_up = drafter.forward(d_cache, self.cu_in)
            self.draft_token = z(B)
        if s.kind == "chain" and s.k > 1:
            self.dr_in = ForwardInputs(z(B, 1), z(B, 1), self.d_lens, offsets=z(B, dtype=torch.int32))
            self.draft_one = drafter.forward(d_cache, self.dr_in)
        if tree:
            self.tree = TreeDrafter(B, s.depth, s.topk, s.budget, device)
            if s.depth > 1:
                self.lv_in = ForwardInputs(z(B, s.topk), z(B, s.topk), self.d_lens,
                                           offsets=z(B, dtype=torch.int32),
                                           mask=z(B, s.topk, self.tree.U, dtype=torch.bool))
                self.level = drafter.forward(d_cache, self.lv_in)

    # ------------------------------------------------------------------ pieces
    def _catch_up(self) -> torch.Tensor:
        """Drafter logits after the pending token, [B, V]; commits the fed tokens."""
        torch.add(self.d_lens[:, None], self.arange_f[None, :], out=self.cu_in.pos)
        logits = self.catch_up.run()
        row = (self.n_feed.long() - 1).clamp(min=0)
        last = logits.gather(1, row[:, None, None].expand(-1, 1, logits.shape[-1]))[:, 0]
        self.d_lens += self.n_feed
        return last

    def _draft_chain(self) -> None:
        ids = self.v_in.ids
        argmax(self._catch_up(), out=self.draft_token)
        ids[:, 1] = self.draft_token
        for i in range(1, self.schedule.k):
            self.dr_in.ids[:, 0] = self.draft_token
            self.dr_in.offsets.fill_(i - 1)
            torch.add(self.d_lens[:, None], i - 1, out=self.dr_in.pos)
            argmax(self.draft_one.run()[:, 0], out=self.draft_token)
            ids[:, i + 1] = self.draft_token

    def _draft_tree(self) -> None:
        s, tree = self.schedule, self.tree
        tree.root(self._catch_up())
        for level in range(1, s.depth):
            tree.level_inputs(level, self.lv_in.ids, self.lv_in.mask)
            self.lv_in.offsets.fill_((level - 1) * s.topk)
            self.lv_in.pos.copy_((self.d_lens[:, None] + (level - 1)).expand(-1, s.topk))
            tree.propose(level, self.level.run())
        tree.tree(self.pending, self.v_in.ids, self.v_parents, self.v_depth, self.v_in.mask)

    def _verify_accept_commit(self) -> None:
        v = self.v_in
        v.ids[:, 0] = self.pending
        torch.add(self.t_lens[:, None].long(), self.v_depth, out=v.pos)
        logits = self.verify.run()
        argmax(logits, out=self.v_arg)
        greedy_accept_tree(v.ids, self.v_parents, self.v_arg, acc_idx=self.acc_idx, n_acc=self.n_acc,
                           bonus=self.bonus, emitted=self.emitted)
        n_eff = self.n_acc * self.active
        if self.schedule.compact and self.Tv > 1:
            for layer in self.t_cache.k:
                k_cache, v_cache = self.t_cache.layer(layer)
                kv_compact(k_cache, v_cache, self.t_lens, self.acc_idx, n_eff)
        self.t_lens += n_eff
        self.pending.copy_(torch.where(self.active != 0, self.bonus, self.pending))
        if self.drafter is not None:
            self.feed.copy_(self.emitted[:, :self.feed.shape[1]])
            self.n_feed.copy_(n_eff)
        self.readback[:, :self.Tv] = self.emitted
        self.readback[:, self.Tv] = n_eff

    # ------------------------------------------------------------------ the step
    def run(self) -> None:
        kind = self.schedule.kind
        if kind == "chain" and self.Tv > 1:
            self._draft_chain()
        elif kind == "tree":
            self._draft_tree()
        self._verify_accept_commit()
