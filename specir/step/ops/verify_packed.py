"""verify.packed @target, %ctx, %draft: every live request's draft verified in one ragged forward.

Semantics: the same logits as verify.chain / verify.tree over the same nodes (node 0 = the pending
token, then the chain or the tree; positions lens + depth; a chain causally, a tree under its
ancestor mask), but the target runs once over the packed list of the valid nodes of the live
requests (specir/step/ragged.py: cumulative offsets, per-token slot, cache row, position and
mask row), without per-request padding: a frozen slot, or a node a budget dropped, costs nothing
(the packed total is rounded up to a power of two past 8 rows, ragged.bucket, so the engine keeps a
bounded set of forward shapes). The result is logits [B, N, V], zero at the nodes not verified
(never read by acceptance), in one buffer per (B, N, V, dtype) that the op keeps and reuses each
step (ragged.unpack zeroes only the rows the last step wrote).
The packed size is data (a host read), so the op runs between captured segments (needs_host); its
forward is captured per bucket on a capturing backend (StepContext.launch), every bucket up to
B x N rows at the batch's first packed step (_prime).
Width: 1 + the draft's width per request at most; depth 1 + the draft's depth. One forward.
Recurrent targets are refused by the type rule (their state is per request, not per row).
"""
from __future__ import annotations

from specir.ir.opdefs import OpDef, TypeRuleError, register_op, symbol, value
from specir.ir.types import logits as logits_type
from specir.step import ragged
from specir.step.interfaces import ModelForward, StepInterfaces
from specir.step.values import Nodes, Verified

from .common import has_recurrent_state, model_of
from .verify import depth, width


def _infer(op, ctx):
    if has_recurrent_state(ctx.model(op.operands[0])):
        raise TypeRuleError(f"verify.packed gives every token its own row, but {op.operands[0]} has recurrent "
                            "layers (their state is per request)", "verify a hybrid target with verify.chain or "
                            "verify.tree (drop batch-fusion)")
    mask = ctx.model_mask(op.operands[0])
    if mask is not None and mask != "tree":
        raise TypeRuleError(f"verify.packed gives every packed token its own mask row, so {op.operands[0]} needs "
                            f"mask<tree>, not mask<{mask}>", "run the batch-fusion pass, which rewrites the mask")
    return logits_type()


def _forwards(op, info):
    N = width(op, info)
    return [ModelForward(model_of(op), N, 1, "verify", N, mask_width=N, packed=True)]


def _forward(ctx, state, size: int, N: int, B: int):
    """(key, inputs, forward) of the packed forward over `size` rows of B request slots, built once
    (its inputs carry row_start: an executor may group the rows by request)."""
    key = ("packed", size, N, B)
    entry = state.forwards.get(key)
    if entry is None:
        inputs = ragged.allocate(size, N, ctx.device, requests=B)
        entry = state.forwards[key] = (inputs, state.executor.forward_on(state.cache, inputs))
    return (key, *entry)


def _prime(ctx, state, nodes, packed, most: int) -> None:
    """On a capturing backend, at the first packed step of a batch: every bucket up to `most` rows
    built, warmed and captured now (where the engine's warm-up runs), not when the live total first
    falls into it mid-decode (its kernels would compile and its graph be captured inside the timed
    decode). Each primed forward is the packing's first token alone, then pad rows (ragged.first_row:
    it writes that token's KV row with the values the step's own forward writes next; an executor
    that ignores row_start computes the pad rows as that token too)."""
    if not ctx.captures_forwards(state) or state.graphs.get(("primed", nodes.width)):
        return
    state.graphs[("primed", nodes.width)] = True
    first = ragged.first_row(packed)
    for size in ragged.buckets(most):
        key, inputs, forward = _forward(ctx, state, size, nodes.width, nodes.tokens.shape[0])
        ragged.forward_inputs(ragged.padded(first, size), nodes, state.lens, inputs)
        ctx.prepare(state, key, forward.run)


def lower(ctx, op, args):
    state = ctx.state(model_of(op), "verify")
    draft = args[1]
    nodes = draft if isinstance(draft, Nodes) else Nodes.chain(ctx.pending, draft)
    B, N = nodes.tokens.shape
    packed = ragged.pack(nodes, ctx.active)
    T = packed.total
    if T == 0:  # nothing live: the step commits nothing
        return Verified(nodes.tokens.new_zeros(B, N, 1).float(), nodes, state.name)
    _prime(ctx, state, nodes, packed, B * N)
    size = ragged.bucket(T)
    key, inputs, forward = _forward(ctx, state, size, N, B)
    ragged.forward_inputs(ragged.padded(packed, size), nodes, state.lens, inputs)
    ctx.op_state[("ragged", id(op))] = packed  # the last step's packing, for tests and metrics
    logits = ctx.launch(state, key, forward.run)
    buffers = ctx.op_state.setdefault(("unpacked", id(op)), {})
    return Verified(ragged.unpack(logits, packed, B, N, buffers), nodes, state.name)


register_op(OpDef("verify.packed", "step",
                  (symbol("target"), value("ctx", "context"), value("draft", "tokens", "tree")),
                  {}, _infer, pure=False, role="verify",
                  doc="One target forward over every live request's draft, packed without padding.",
                  step=StepInterfaces(width=width, depth=depth, forwards=_forwards, lower=lower,
                                      effects=("verify", "host"), needs_host=True, overhead_s=30e-6)))
