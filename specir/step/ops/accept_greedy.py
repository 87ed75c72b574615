"""accept.greedy [%draft,] %logits: greedy acceptance over a chain or a tree (lossless).

Semantics per request, with target[t] = argmax of the verifier's logits at node t: node 0 is
accepted; node t > 0 is accepted iff it is valid, its parent is accepted and token[t] ==
target[parent[t]]. The accepted path is the ancestry of the deepest accepted node (lowest index on
ties), from node 0; the step emits the path's drafted tokens, then target[last path node] (the
bonus). Emitted slots past n_emit hold 0. No forwards; width and depth 0.
Lowerings: torch (below, pointer jumping, capture-safe) and a Triton kernel on the Triton backend
(backends/triton/step_kernels.py), tested against each other.
"""
from __future__ import annotations

import math

import torch

from specir.ir.opdefs import OpDef, register_op, value
from specir.ir.types import ACCEPTED
from specir.step.interfaces import StepInterfaces
from specir.step.values import Accepted, Nodes

from .common import no_forwards, zero


def accept_path(nodes: Nodes, target: torch.Tensor, model: str) -> Accepted:
    """The greedy acceptance of `nodes` given the verifier's argmax `target` [B, N]."""
    B, N = nodes.tokens.shape
    dev = nodes.tokens.device
    arange = torch.arange(N, device=dev)
    par = nodes.parents.long().clamp(min=0)
    match = (nodes.parents >= 0) & nodes.valid & (nodes.tokens == target.gather(1, par))
    good = match | (arange == 0)[None, :]
    jump = par
    for _ in range(max(1, math.ceil(math.log2(N))) + 1):
        good = good & good.gather(1, jump)
        jump = jump.gather(1, jump)
    key = torch.where(good, nodes.depths * (N + 1) + (N - arange)[None, :], -1)
    best = key.argmax(dim=1)
    n_path = (nodes.depths.gather(1, best[:, None])[:, 0] + 1).to(torch.int32)
    if nodes.mask is not None:
        on_path = nodes.mask.gather(1, best[:, None, None].expand(B, 1, N))[:, 0]
    else:
        on_path = arange[None, :] <= best[:, None]
    order = torch.where(on_path, on_path.long().cumsum(1) - 1, N)
    slots = torch.full((B, N + 1), -1, dtype=torch.long, device=dev)
    slots.scatter_(1, order, arange[None, :].expand(B, N))
    path = slots[:, :N]
    path_tokens = nodes.tokens.gather(1, path.clamp(min=0))
    shifted = torch.cat([path_tokens[:, 1:], torch.zeros_like(path_tokens[:, :1])], dim=1)
    bonus = target.gather(1, best[:, None])
    j = arange[None, :]
    last = (n_path.long() - 1)[:, None]
    emitted = torch.where(j < last, shifted, torch.where(j == last, bonus, 0))
    return Accepted(path.to(torch.int32), n_path, emitted, n_path.clone(), model)


def lower(ctx, op, args):
    verified = args[-1]
    return accept_path(verified.nodes, ctx.backend.argmax(verified.logits), verified.model)


register_op(OpDef(
    "accept.greedy", "step", (value("draft", "tokens", "tree", optional=True), value("logits", "logits")), {},
    lambda op, ctx: ACCEPTED, doc="Greedy acceptance.", role="accept",
    step=StepInterfaces(width=zero, depth=zero, forwards=no_forwards, lower=lower, effects=("accept",))))
