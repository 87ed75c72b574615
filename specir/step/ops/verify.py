"""verify.chain @target, %ctx[, %draft] and verify.tree @target, %ctx, %tree: one target forward.

Semantics: the target runs over the nodes (node 0 = the pending token, then the drafted chain, or
the token tree) at rows lens .. lens + N - 1 of its cache and positions lens + depth, a chain
causally and a tree under its ancestor mask; the result is the logits [B, N, V] over the nodes.
Width: 1 + the draft's width (verify.chain without a draft: 1); depth (the most tokens a step can
emit): 1 + the draft's depth. One forward of that width on the target per step.
"""
from __future__ import annotations

from specir.ir.opdefs import OpDef, TypeRuleError, register_op, symbol, value
from specir.ir.types import logits as logits_type
from specir.step.interfaces import ModelForward, StepInterfaces
from specir.step.values import Nodes, Verified

from .common import model_of


def _draft_value(op):
    return op.values[1] if len(op.values) > 1 else None


def width(op, info) -> int:
    return 1 + info.width_of(_draft_value(op))


def depth(op, info) -> int:
    return 1 + info.depth_of(_draft_value(op))


def _infer(kind):
    def rule(op, ctx):
        mask = ctx.model_mask(op.operands[0])
        if mask is not None and mask != kind:
            hint = ("run the tree-verify pass, which rewrites the model's mask to mask<tree>"
                    if kind == "tree" else "a chain is verified by a model whose mask is mask<causal>")
            raise TypeRuleError(f"verify.{kind} needs model {op.operands[0]} with mask<{kind}>, "
                                f"but its graph takes mask<{mask}>", hint)
        return logits_type()
    return rule


def _forwards(op, info):
    N = width(op, info)
    tree = op.name == "verify.tree"
    return [ModelForward(model_of(op), N, 1, "verify", N, mask_width=N if tree else 0)]


def lower(ctx, op, args):
    state = ctx.state(model_of(op), "verify")
    draft = args[1] if len(args) > 1 else None
    nodes = draft if isinstance(draft, Nodes) else Nodes.chain(ctx.pending, draft)
    N = nodes.width
    tree = nodes.mask is not None
    inputs, forward = ctx.forward(state, ("verify", N, tree), N, mask_width=N if tree else 0)
    inputs.ids.copy_(nodes.tokens)
    inputs.pos.copy_(state.lens.long()[:, None] + nodes.depths)
    if tree:
        inputs.mask.copy_(nodes.mask)
    return Verified(forward.run(), nodes, state.name)


_IFACE = dict(width=width, depth=depth, forwards=_forwards, lower=lower, effects=("verify",))
register_op(OpDef("verify.chain", "step",
                  (symbol("target"), value("ctx", "context"), value("draft", "tokens", optional=True)),
                  {}, _infer("causal"), pure=False, role="verify",
                  doc="One target forward over the pending token and the drafted chain.",
                  step=StepInterfaces(**_IFACE)))
register_op(OpDef("verify.tree", "step", (symbol("target"), value("ctx", "context"), value("draft", "tree")),
                  {}, _infer("tree"), pure=False, role="verify",
                  doc="One target forward over a token tree with the tree attention mask.",
                  step=StepInterfaces(**_IFACE)))
