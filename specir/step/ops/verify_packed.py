"""verify.packed @target, %ctx, %draft: every live request's draft verified in one ragged forward.

Semantics: the same logits as verify.chain / verify.tree over the same nodes (node 0 = the pending
token, then the chain or the tree; positions lens + depth; a chain causally, a tree under its
ancestor mask), but the target runs once over the packed list of the valid nodes of the live
requests (specir/step/ragged.py: cumulative offsets, per-token slot, cache row, position and
mask row), without per-request padding: a frozen slot, or a node a budget dropped, costs nothing.
The result is logits [B, N, V], zero at the nodes not verified (never read by acceptance), in one
buffer per (B, N, V, dtype) that the op keeps and reuses each step (ragged.unpack: zeroing at most
the rows of the op's largest forward, not B x N).
Capture-safe (device-side verify inputs, as SGLang builds them): the packing happens on the device
into a forward of `ragged.capacity(bound)` rows (exactly `bound` on a backend whose
`pads_packed_rows` is false: the reference and TVM ones), where the bound is host-known, the live requests'
pending tokens plus the most drafted nodes the draft holds at that live count
(StepInfo.drafted_most_of: a budget's table entry); rows past the packed total are pad rows. The
row count is the op's `variant`, so the program keeps one capture of the step per forward size.
Width: 1 + the draft's width per request at most; depth 1 + the draft's depth. One forward.
A hybrid target's recurrent ops run per request around the packed rows (specir/runtime/packed_recurrent.py:
the rows regrouped into the [requests, N] layout verify.tree uses, so node states and commits are the tree's);
those ops cost a full tree per request slot, frozen slots and dropped nodes included (the cost model and the
shrink table still price them by packed rows).
"""
from __future__ import annotations

from specir.ir.opdefs import OpDef, TypeRuleError, register_op, symbol, value
from specir.ir.types import logits as logits_type
from specir.step import ragged
from specir.step.interfaces import ModelForward, StepInterfaces
from specir.step.values import Nodes, Verified

from .common import model_of
from .verify import _draft_value, depth, width


def _infer(op, ctx):
    mask = ctx.model_mask(op.operands[0])
    if mask is not None and mask != "tree":
        raise TypeRuleError(f"verify.packed gives every packed token its own mask row, so {op.operands[0]} needs "
                            f"mask<tree>, not mask<{mask}>", "run the batch-fusion pass, which rewrites the mask")
    return logits_type()


def _forwards(op, info):
    N = width(op, info)
    return [ModelForward(model_of(op), N, 1, "verify", N, mask_width=N, packed=True)]


def _forward(ctx, state, rows: int, N: int, B: int):
    """(inputs, forward) of the packed forward over `rows` rows of B request slots, built once
    (its inputs carry row_start: an executor may group the rows by request)."""
    key = ("packed", rows, N, B)
    entry = state.forwards.get(key)
    if entry is None:
        inputs = ragged.allocate(rows, N, ctx.device, requests=B)
        entry = state.forwards[key] = (inputs, state.executor.forward_on(state.cache, inputs))
    return entry


def setup(ctx, op) -> None:
    """The forward's rows by live count (index = live requests, 0 .. B): the pending tokens plus the
    most drafted nodes the draft holds then, never past live x N, rounded up to ragged.capacity on
    a backend that compiles or captures per forward size (`pads_packed_rows`: fewer shapes); exact
    elsewhere, where a pad row only costs its compute."""
    info, draft = ctx.info, _draft_value(op)
    N = width(op, info)
    most = (lambda live: 0) if draft is None else (lambda live: info.drafted_most_of(draft, live))
    rounded = ragged.capacity if ctx.backend.pads_packed_rows else (lambda rows: rows)
    ctx.op_state[("rows", id(op))] = [0] + [rounded(min(live * N, live + most(live)))
                                            for live in range(1, ctx.B + 1)]


def variant(ctx, op) -> int:
    return ctx.op_state[("rows", id(op))][ctx.live_requests()]


def lower(ctx, op, args):
    state = ctx.state(model_of(op), "verify")
    draft = args[1]
    nodes = draft if isinstance(draft, Nodes) else Nodes.chain(ctx.pending, draft)
    B, N = nodes.tokens.shape
    # the live count's bound, never past every slot's nodes (a draft turned off has width 0 this step)
    rows = min(ctx.variants.get(id(op)) or variant(ctx, op), ragged.capacity(B * N))
    if rows == 0:  # nothing live: the step commits nothing
        return Verified(nodes.tokens.new_zeros(B, N, 1).float(), nodes, state.name)
    packed = ragged.pack(nodes, ctx.active, rows)
    inputs, forward = _forward(ctx, state, rows, N, B)
    ragged.forward_inputs(packed, nodes, state.lens, inputs)
    ctx.op_state[("ragged", id(op))] = packed  # the last step's packing, for tests and metrics
    buffers = ctx.op_state.setdefault(("unpacked", id(op)), {})
    most = min(max(ctx.op_state[("rows", id(op))]), ragged.capacity(B * N))  # the largest forward of any live count
    return Verified(ragged.unpack(forward.run(), packed, B, N, buffers, most_rows=most), nodes, state.name)


register_op(OpDef("verify.packed", "step",
                  (symbol("target"), value("ctx", "context"), value("draft", "tokens", "tree")),
                  {}, _infer, pure=False, role="verify",
                  doc="One target forward over every live request's draft, packed without padding.",
                  step=StepInterfaces(width=width, depth=depth, forwards=_forwards, lower=lower, setup=setup,
                                      variant=variant, effects=("verify",), overhead_s=30e-6)))
