"""The Triton lowerings of step ops, registered into their definitions' `lowerings["triton"]`.

- accept.greedy (and accept.sample outside sampling mode): kernels.accept.greedy_accept_tree over
  the verifier's argmax (invalid nodes get parent -1, so they are never accepted); same contract
  as the torch semantics (specir/step/ops/accept_greedy.py), tested against it.
"""
from __future__ import annotations

import torch

from specir.ir.opdefs import OPS
from specir.step.ops import accept_sample
from specir.step.values import Accepted

from .kernels.accept import greedy_accept_tree


def greedy_accept(ctx, verified) -> Accepted:
    nodes = verified.nodes
    target = ctx.backend.argmax(verified.logits)
    parents = torch.where(nodes.valid, nodes.parents, -1).to(torch.int32).contiguous()
    tokens = nodes.tokens.contiguous()
    emitted = torch.empty_like(tokens)
    path, n, _ = greedy_accept_tree(tokens, parents, target.contiguous(), emitted=emitted)
    return Accepted(path, n, emitted.clamp_(min=0), n.clone(), verified.model)


def _accept_greedy(ctx, op, args):
    return greedy_accept(ctx, args[-1])


def _accept_sample(ctx, op, args):
    if not ctx.sampling:
        return greedy_accept(ctx, args[-1])
    return accept_sample.lower(ctx, op, args)


OPS["accept.greedy"].step.lowerings["triton"] = _accept_greedy
OPS["accept.sample"].step.lowerings["triton"] = _accept_sample
