"""Op definitions: operand and attribute signatures, result-type rules, effects.

Every op the IR may contain is registered here (plugins may register more with `register_op`).
The verifier checks ops against these definitions; canonicalize reads `pure` and defaults.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .types import Type, act, logits

MISSING = object()


@dataclass(frozen=True)
class AttrSpec:
    kind: str  # int | float | str | bool | list | dict
    default: Any = MISSING  # MISSING means required
    choices: tuple | None = None
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is MISSING


@dataclass(frozen=True)
class OperandSpec:
    role: str
    types: tuple[str, ...]  # accepted type names; "@" means a model symbol
    optional: bool = False


class TypeRuleError(Exception):
    """Raised by a result-type rule: message and hint for the verifier to place."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class OpDef:
    name: str
    region: str  # "model" | "step"
    operands: tuple[OperandSpec, ...]
    attrs: dict[str, AttrSpec] = field(default_factory=dict)
    infer: Callable[..., Type | None] = lambda op, ctx: None
    pure: bool = True
    doc: str = ""
    role: str = ""  # step ops: "draft" | "verify" | "accept" | "commit" (the declared target is the last verify's)
    step: Any = None  # step ops: specir.step.interfaces.StepInterfaces (width, forwards, lowering, ...)


OPS: dict[str, OpDef] = {}


def register_op(opdef: OpDef) -> OpDef:
    """Add an op (built-in or from a plugin). Re-registering the same name replaces it."""
    OPS[opdef.name] = opdef
    return opdef


def value(role: str, *types: str, optional: bool = False) -> OperandSpec:
    return OperandSpec(role, types, optional)


def symbol(role: str) -> OperandSpec:
    return OperandSpec(role, ("@",))


# ---------------------------------------------------------------- model-graph type rules

def _weight_shape(op, ctx, attr="weight"):
    return ctx.weight_type(op, op.attrs[attr]).shape


def _infer_embed(op, ctx):
    shape = _weight_shape(op, ctx)
    if len(shape) != 2:
        raise TypeRuleError(f"embedding weight must be 2-D, got shape {list(shape)}")
    return act(shape[1])


def _infer_norm(op, ctx):
    x = ctx.value_type(op.operands[0])
    shape = _weight_shape(op, ctx)
    group = op.attrs.get("group")
    want = group if group else x.width
    if shape != (want,):
        raise TypeRuleError(f"norm weight has shape {list(shape)}, expected [{want}]",
                            "the weight must match the normalised width (or `group`)")
    if group and x.width % group:
        raise TypeRuleError(f"width {x.width} is not a multiple of group {group}")
    return x


def _infer_linear(op, ctx):
    x = ctx.value_type(op.operands[0])
    shape = _weight_shape(op, ctx)
    if len(shape) != 2 or shape[1] != x.width:
        raise TypeRuleError(
            f"weight {op.attrs['weight']!r} has shape {list(shape)}, but the input is act<{x.width}>",
            f"a linear weight is [out, in] with in = {x.width}")
    if op.attrs.get("bias"):
        bias = _weight_shape(op, ctx, "bias")
        if bias != (shape[0],):
            raise TypeRuleError(f"bias has shape {list(bias)}, expected [{shape[0]}]")
    if op.type is not None and op.type.name == "logits":
        return logits(shape[0])
    return act(shape[0])


def _infer_rope(op, ctx):
    x = ctx.value_type(op.operands[0])
    hd = op.attrs["head_dim"]
    if x.width % hd:
        raise TypeRuleError(f"width {x.width} is not a multiple of head_dim {hd}")
    rope = op.attrs["rope"]
    if "type" not in rope or "theta" not in rope:
        raise TypeRuleError("rope attribute needs at least `type` and `theta`",
                            'e.g. rope = {theta = 10000.0, type = "default"}')
    return x


def _infer_attention(op, ctx):
    q, k, v = (ctx.value_type(o) for o in op.operands[:3])
    a = op.attrs
    heads, kv_heads, hd = a["heads"], a["kv_heads"], a["head_dim"]
    if q.width != heads * hd:
        raise TypeRuleError(f"q is act<{q.width}> but heads * head_dim = {heads * hd}")
    if k.width != kv_heads * hd or v.width != kv_heads * hd:
        raise TypeRuleError(f"k/v are act<{k.width}>/act<{v.width}> but kv_heads * head_dim = {kv_heads * hd}")
    if heads % kv_heads:
        raise TypeRuleError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    return act(heads * hd)


def _infer_same_width(op, ctx):
    a, b = (ctx.value_type(o) for o in op.operands)
    if a != b:
        raise TypeRuleError(f"operands have different types {a} and {b}")
    return a


def _infer_packed_linear(op, ctx):
    w = ctx.weight_type(op, op.attrs["weight"])
    if w.dtype != op.attrs["format"]:
        raise TypeRuleError(f"weight {op.attrs['weight']!r} is {w.dtype}, but the op reads {op.attrs['format']}",
                            "pack-weights changes both the weight declaration and the op")
    return _infer_linear(op, ctx)


def _infer_linear_dtype(op, ctx):
    w = ctx.weight_type(op, op.attrs["weight"])
    if w.dtype == "bf12":
        raise TypeRuleError(f"weight {op.attrs['weight']!r} is packed (bf12); `linear` reads plain weights",
                            "use packed_linear {format = \"bf12\"} for packed weights")
    return _infer_linear(op, ctx)


ROPE_DOC = "rotary parameters: type (default|linear|dynamic|yarn|longrope|llama3), theta, and the type's keys"

register_op(OpDef("embed", "model", (value("ids", "ids"),), {"weight": AttrSpec("str")}, _infer_embed,
                  doc="Gather rows of the embedding table."))
register_op(OpDef("rms_norm", "model", (value("x", "act"),),
                  {"weight": AttrSpec("str"), "eps": AttrSpec("float"),
                   "group": AttrSpec("int", 0, doc="normalise each group of this many channels (qk-norm)")},
                  _infer_norm, doc="RMSNorm, HF Llama numerics."))
register_op(OpDef("linear", "model", (value("x", "act"),),
                  {"weight": AttrSpec("str"), "bias": AttrSpec("str", "")}, _infer_linear_dtype,
                  doc="y = x @ W^T (+ b); W is [out, in]."))
register_op(OpDef("packed_linear", "model", (value("x", "act"),),
                  {"weight": AttrSpec("str"), "format": AttrSpec("str", choices=("bf12",)),
                   "bias": AttrSpec("str", "")}, _infer_packed_linear,
                  doc="linear over packed weights, decoded inside the kernel."))
register_op(OpDef("rope", "model", (value("x", "act"), value("positions", "positions")),
                  {"head_dim": AttrSpec("int"), "rope": AttrSpec("dict", doc=ROPE_DOC)}, _infer_rope,
                  doc="Rotary embedding at absolute positions (rotate_half convention)."))
register_op(OpDef("attention", "model",
                  (value("q", "act"), value("k", "act"), value("v", "act"), value("mask", "mask")),
                  {"layer": AttrSpec("int", doc="KV-cache slot of this layer"),
                   "heads": AttrSpec("int"), "kv_heads": AttrSpec("int"), "head_dim": AttrSpec("int"),
                   "scale": AttrSpec("float", 0.0, doc="0 means 1/sqrt(head_dim)"),
                   "window": AttrSpec("int", 0, doc="sliding window; 0 means none")},
                  _infer_attention, pure=False,
                  doc="Writes k/v to the layer's cache, attends over cache + new tokens under the mask."))
register_op(OpDef("swiglu", "model", (value("gate", "act"), value("up", "act")), {}, _infer_same_width,
                  doc="silu(gate) * up."))
register_op(OpDef("add", "model", (value("a", "act"), value("b", "act")), {}, _infer_same_width,
                  doc="Elementwise sum (residual)."))


def without_defaults(opname: str, attrs: dict) -> dict:
    """Drop None values and values equal to the op's declared default (the canonical form)."""
    specs = OPS[opname].attrs if opname in OPS else {}
    out = {}
    for key, val in attrs.items():
        spec = specs.get(key)
        if val is None or (spec is not None and not spec.required and spec.default == val
                           and type(spec.default) is type(val)):
            continue
        out[key] = val
    return out


# The step ops: one file each under specir/step/ops (definition, interfaces, semantics).
from ..step import ops as _step_ops  # noqa: E402,F401

# The hybrid families' ops (stateless and recurrent) live in their own files.
from . import ops_hybrid, ops_recurrent  # noqa: E402,F401
