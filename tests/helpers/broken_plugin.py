"""Deliberately broken step ops, loaded with --plugin, to show that `specir check` catches them.

- accept.trusting: accepts every drafted token without verifying it;
- commit.shifted: commits the KV rows one slot too far along (the wrong KV slot);
- accept.no_correction: on the first rejected draft, emits the drafter's token instead of the
  target's correction (skips the bonus-token correction).
Each registers an op definition with its step interfaces (so the IR verifies and the step runs on
every backend); their semantics are the built-in ones with one deliberate fault.
"""
import dataclasses

import torch

from specir.ir.opdefs import OPS, OpDef, register_op
from specir.pass_infra import Option, Pass
from specir.step.ops.accept_greedy import accept_path
from specir.step.ops.commit import lower as commit_lower
from specir.step.values import Accepted


def _trusting(ctx, op, args):
    v = args[-1]
    nodes = v.nodes
    B, N = nodes.tokens.shape
    count = nodes.valid.sum(1).to(torch.int32)  # every valid node of the chain, verified or not
    target = ctx.backend.argmax(v.logits)
    path = torch.arange(N, device=ctx.device)[None, :].expand(B, N).to(torch.int32)
    path = torch.where(path < count[:, None], path, -1)
    last = (count.long() - 1)[:, None]
    j = torch.arange(N, device=ctx.device)[None, :]
    shifted = torch.cat([nodes.tokens[:, 1:], torch.zeros_like(nodes.tokens[:, :1])], dim=1)
    emitted = torch.where(j < last, shifted, torch.where(j == last, target.gather(1, last), 0))
    return Accepted(path, count, emitted, count.clone(), v.model)


def _no_correction(ctx, op, args):
    v = args[-1]
    good = accept_path(v.nodes, ctx.backend.argmax(v.logits), v.model)
    nxt = good.n_path.long()  # the first rejected node, if any
    N = v.nodes.width
    has = (nxt < N) & v.nodes.valid.gather(1, nxt.clamp(max=N - 1)[:, None])[:, 0]
    drafted = v.nodes.tokens.gather(1, nxt.clamp(max=N - 1)[:, None])[:, 0]
    last = (good.n_emit.long() - 1)[:, None]
    wrong = torch.where(has, drafted, good.emitted.gather(1, last)[:, 0])
    emitted = good.emitted.scatter(1, last, wrong[:, None])
    return dataclasses.replace(good, emitted=emitted)


def _commit_shifted(ctx, op, args):
    acc = args[1]
    shifted = torch.where(acc.path >= 0, acc.path + 1, acc.path)  # one row too far: another token's KV
    return commit_lower(ctx, op.with_(attrs=op.attrs.set(kv="compact")), [args[0], dataclasses.replace(acc, path=shifted)])


def _like(base: str, name: str, lower) -> None:
    d = OPS[base]
    register_op(dataclasses.replace(d, name=name, attrs={}, step=dataclasses.replace(d.step, lower=lower, lowerings={})))


_like("accept.greedy", "accept.trusting", _trusting)
_like("accept.greedy", "accept.no_correction", _no_correction)
_like("commit", "commit.shifted", _commit_shifted)


class UseBroken(Pass):
    """Rewrite the step to use one broken op: which = trusting | shifted | no_correction."""
    name = "use-broken"
    options = {"which": Option(str, "trusting", choices=("trusting", "shifted", "no_correction"))}

    def run(self, pipeline):
        from dataclasses import replace
        targets = {"trusting": ("accept.greedy", "accept.sample"),
                   "no_correction": ("accept.greedy", "accept.sample"), "shifted": ("commit",)}[self.which]
        new = {"trusting": "accept.trusting", "no_correction": "accept.no_correction",
               "shifted": "commit.shifted"}[self.which]
        ops = tuple(replace(op, name=new, attrs=op.attrs.set(kv=None)) if op.name in targets else op
                    for op in pipeline.step.ops)
        if ops == pipeline.step.ops:
            raise ValueError(f"use-broken: nothing to replace for {self.which}")
        return replace(pipeline, step=replace(pipeline.step, ops=ops))


assert OpDef  # re-exported for plugin authors reading this file
