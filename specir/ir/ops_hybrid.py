"""Stateless model-graph ops that the hybrid families (Qwen3.5 / Qwen3-Next, Bamba, Nemotron-H,
Falcon-H1, GraniteMoeHybrid) need besides the Llama ops. Each op's meaning is its `doc`; the
reference numerics are in backends/reference/hybrid.py.

| op | operands | attributes | result |
|---|---|---|---|
| `rms_norm_1p` | x | weight, eps, group | x * rsqrt(mean(x^2) + eps) * (1 + w), fp32, cast once |
| `rms_norm_gated` | x, gate | weight, eps, group, gate_first | RMSNorm with a silu(gate) factor |
| `slice` | x | start, size, group | channels [start, start+size) of every group |
| `concat` | a, b[, c[, d]] | | channels of a, then b, ... |
| `scale` | x (act or logits) | factor, divisor, segments, factors | x times constants (per segment) |
| `activation` | x | fn | fn(x) elementwise |
| `mul` | a, b | | a * b elementwise |
"""
from __future__ import annotations

from .opdefs import AttrSpec, OpDef, TypeRuleError, _infer_same_width, register_op, value
from .types import act

ACTIVATIONS = ("silu", "sigmoid", "relu", "relu2", "gelu", "gelu_tanh", "tanh")


def _group_of(op, width: int) -> int:
    group = op.attrs.get("group") or width
    if group <= 0 or width % group:
        raise TypeRuleError(f"width {width} is not a multiple of group {group}", "group must divide the width, e.g. group = the head dim")
    return group


def _infer_norm_1p(op, ctx):
    x = ctx.value_type(op.operands[0])
    group = _group_of(op, x.width)
    shape = ctx.weight_type(op, op.attrs["weight"]).shape
    if shape != (group,):
        raise TypeRuleError(f"norm weight has shape {list(shape)}, expected [{group}]",
                            "the weight matches the normalised width (or `group`)")
    return x


def _infer_norm_gated(op, ctx):
    x, gate = (ctx.value_type(o) for o in op.operands)
    if x != gate:
        raise TypeRuleError(f"x is {x} but gate is {gate}", "the gate has the width of the normalised value")
    group = _group_of(op, x.width)
    shape = ctx.weight_type(op, op.attrs["weight"]).shape
    if shape not in ((x.width,), (group,)):
        raise TypeRuleError(f"norm weight has shape {list(shape)}, expected [{x.width}] or [{group}]",
                            "a weight of `group` channels is shared by every group")
    return x


def _infer_slice(op, ctx):
    x = ctx.value_type(op.operands[0])
    group = _group_of(op, x.width)
    start, size = op.attrs["start"], op.attrs["size"]
    if start < 0 or size < 1 or start + size > group:
        raise TypeRuleError(f"channels [{start}, {start + size}) do not fit in a group of {group}",
                            "need 0 <= start and start + size <= group (the width when group is 0)")
    return act(x.width // group * size)


def _infer_concat(op, ctx):
    return act(sum(ctx.value_type(o).width for o in op.operands))


def _infer_scale(op, ctx):
    x = ctx.value_type(op.operands[0])
    segments, factors = op.attrs.get("segments", ()), op.attrs.get("factors", ())
    if len(segments) != len(factors):
        raise TypeRuleError(f"{len(segments)} segments but {len(factors)} factors",
                            "give one factor per segment of channels")
    if segments and sum(segments) != x.width:
        raise TypeRuleError(f"segments cover {sum(segments)} channels, the input has {x.width}",
                            "segments are consecutive channel counts that add up to the width")
    return x


def _infer_unary(op, ctx):
    return ctx.value_type(op.operands[0])


register_op(OpDef("rms_norm_1p", "model", (value("x", "act"),),
                  {"weight": AttrSpec("str"), "eps": AttrSpec("float"),
                   "group": AttrSpec("int", 0, doc="normalise each group of this many channels (qk-norm)")},
                  _infer_norm_1p,
                  doc="Zero-centred RMSNorm (Qwen3.5 / Qwen3-Next): x / rms(x) * (1 + w), computed in fp32 "
                      "and cast once."))
register_op(OpDef("rms_norm_gated", "model", (value("x", "act"), value("gate", "act")),
                  {"weight": AttrSpec("str"), "eps": AttrSpec("float"),
                   "group": AttrSpec("int", 0, doc="normalise each group of this many channels; 0: the width"),
                   "gate_first": AttrSpec("bool", False,
                                          doc="true: rmsnorm(x * silu(gate)) * w (Mamba2); "
                                              "false: rmsnorm(x) * w * silu(gate) (Gated DeltaNet)")},
                  _infer_norm_gated,
                  doc="Gated RMSNorm over groups of channels; the weight is [width] or [group] (shared)."))
register_op(OpDef("slice", "model", (value("x", "act"),),
                  {"start": AttrSpec("int"), "size": AttrSpec("int"),
                   "group": AttrSpec("int", 0, doc="split the width into groups of this many channels; 0: one group")},
                  _infer_slice, doc="Channels [start, start + size) of every group, concatenated."))
register_op(OpDef("concat", "model", (value("a", "act"), value("b", "act"), value("c", "act", optional=True),
                                      value("d", "act", optional=True)),
                  {}, _infer_concat, doc="The channels of the operands, in order."))
register_op(OpDef("scale", "model", (value("x", "act", "logits"),),
                  {"factor": AttrSpec("float", 1.0, doc="multiplies every channel"),
                   "divisor": AttrSpec("float", 1.0, doc="divides every channel (after `factor`)"),
                   "segments": AttrSpec("list", (), doc="consecutive channel counts covering the width"),
                   "factors": AttrSpec("list", (), doc="one multiplier per segment")},
                  _infer_scale,
                  doc="x * factor, then / divisor (Python scalars, as torch applies them to x's dtype), then x * "
                      "the per-segment factors (a vector in x's dtype): muP multipliers and logit scaling."))
register_op(OpDef("activation", "model", (value("x", "act"),),
                  {"fn": AttrSpec("str", choices=ACTIVATIONS,
                                  doc="relu2 is relu(x)^2; gelu is exact, gelu_tanh the tanh approximation")},
                  _infer_unary, doc="An elementwise activation in x's dtype."))
register_op(OpDef("mul", "model", (value("a", "act"), value("b", "act")), {}, _infer_same_width,
                  doc="Elementwise product in the operands' dtype."))
