"""A custom step op and the pass that uses it: the whole of what a new step op needs.

`draft.repeat %ctx {k}` proposes each request's pending token k times (runs of a repeated token:
whitespace, padding, `}}}}`). It is a device op: it reads only `ctx.pending`, so it is captured
with the verify into one CUDA graph on a GPU, and runs eagerly under TRITON_INTERPRET=1 on a CPU.
Lossless like every drafter: the declared target's verify and acceptance judge each token.

    specir opt p.spec --plugin examples/custom_step_op.py -p "repeat-draft{k=3}"
    specir compile p.spec --plugin examples/custom_step_op.py -p repeat-draft --target h200 -o build/
    specir check build/
"""
from dataclasses import replace

import torch

from specir.acceptance_model import matched
from specir.ir.nodes import Attrs
from specir.ir.opdefs import OpDef, register_op, value
from specir.ir.types import TOKENS
from specir.pass_infra import Option, Pass
from specir.step.interfaces import StepInterfaces
from specir.step.ops.common import DRAFT_K, check_k, no_forwards
from specir.step.values import Draft


def _infer(op, ctx):
    """Type rule: k in range; the result is a `tokens` draft."""
    check_k(op)
    return TOKENS


def _lower(ctx, op, args):
    """Semantics (the one torch lowering every backend runs): k copies of the pending token."""
    k = op.attrs["k"]
    tokens = ctx.pending[:, None].expand(ctx.B, k).contiguous()
    return Draft(tokens, torch.full((ctx.B,), k, dtype=torch.int32, device=ctx.device))


def _accepted(op, profile):
    """Cost model (specir/acceptance_model.py): at position i of a profiled path, the target accepts
    the leading copies of the pending token (the path's last token) that continue the path."""
    k = op.attrs["k"]
    return lambda s, i: matched([s.continuation[i - 1] if i else s.prompt[-1]] * k, s, i)


register_op(OpDef(
    "draft.repeat", "step", (value("ctx", "context"),), {"k": DRAFT_K}, _infer,
    doc="Propose the pending token k times.", role="draft",
    step=StepInterfaces(width=lambda op, info: op.attrs["k"], depth=lambda op, info: op.attrs["k"],
                        forwards=no_forwards, lower=_lower, effects=("draft",), accepted=_accepted)))


class RepeatDraft(Pass):
    """Replace every draft.chain / draft.ngram with draft.repeat{k}."""
    name = "repeat-draft"
    options = {"k": Option(int, 2, "copies of the pending token to propose", min=1, max=16, search=(2, 4))}

    def run(self, pipeline):
        ops = tuple(replace(op, name="draft.repeat", operands=op.values, attrs=Attrs({"k": self.k}))
                    if op.name in ("draft.chain", "draft.ngram") else op for op in pipeline.step.ops)
        return replace(pipeline, step=replace(pipeline.step, ops=ops))
