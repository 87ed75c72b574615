"""Op definitions: operand and attribute signatures, result-type rules, effects.

Every op the IR may contain is registered here (plugins may register more with `register_op`).
The verifier checks ops against these definitions; canonicalize reads `pure` and defaults.
"""
from __future__ import annotations

import math
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
    valid: Callable[[Any], str | None] | None = None  # None if the value is fine, else what it must be

    @property
    def required(self) -> bool:
        return self.default is MISSING


MAX_DRAFT_TOKENS = 1024  # k of a chain, depth and topk of a tree: drafted tokens per step / per node
MAX_TREE_BUDGET = 4096  # drafted nodes of a tree per step


def in_range(lo: float | None = None, hi: float | None = None, *, above: bool = False) -> Callable[[Any], str | None]:
    """A value check: lo <= x <= hi (lo < x with `above`); the verifier already refuses nan and inf."""
    if lo is not None and hi is not None:
        want = f"{'>' if above else '>='} {lo} and <= {hi}" if above else f"between {lo} and {hi}"
    elif lo is not None:
        want = f"{'>' if above else '>='} {lo}"
    else:
        want = f"<= {hi}"

    def check(x):
        low_bad = lo is not None and (x <= lo if above else x < lo)
        return f"must be {want}" if low_bad or (hi is not None and x > hi) else None
    return check


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
    cache_layer: str | None = None  # the attribute naming the KV-cache layer this op writes (one op per layer)
    weight_keys: tuple[str, ...] = ()  # model ops: attributes besides weight/bias that name weights
    # model ops: the op returns logits over part of the vocabulary only (-inf elsewhere; draft-vocab's
    # vocab_scatter): a model whose logits end in it may only propose (the verifier), never judge
    narrows_vocab: bool = False


OPS: dict[str, OpDef] = {}


def narrows_vocab(op) -> bool:
    """Whether `op`'s definition says its logits cover part of the vocabulary only."""
    return op is not None and getattr(OPS.get(op.name), "narrows_vocab", False)


def role_of(op) -> str:
    """The step role the definition of `op` (an Op or an op name) declares ("draft", "verify", ...;
    "" for none or an unknown op)."""
    return getattr(OPS.get(op if isinstance(op, str) else op.name), "role", "")


def ops_of_role(ops, role: str) -> str:
    """The names of the step ops of `role` in `ops`, sorted and comma-separated ("none" when there is none):
    what a pass's precondition error says the step holds."""
    return ", ".join(sorted({op.name for op in ops if role_of(op) == role})) or "none"


AUTOREGRESSIVE_HINT = ("this step decodes autoregressively (no draft op): start from a pipeline that drafts "
                       "(specir init with --drafter DIR or ngram)")


def proposes_only(op) -> bool:
    """Whether `op`'s definition only proposes tokens with the models it names (role "draft", and its
    step effects judge nothing: not a two-level step's "mid-verify"); a model with a narrowed head
    (draft-vocab) may serve such ops only."""
    opdef = OPS.get(op if isinstance(op, str) else op.name)
    effects = getattr(getattr(opdef, "step", None), "effects", ())
    return getattr(opdef, "role", "") == "draft" and "mid-verify" not in effects


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
        raise TypeRuleError(f"embedding weight must be 2-D, got shape {list(shape)}", "the embedding table is [vocab, hidden]")
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
        raise TypeRuleError(f"width {x.width} is not a multiple of group {group}", "group is the head_dim of a per-head norm")
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
            raise TypeRuleError(f"bias has shape {list(bias)}, expected [{shape[0]}]", "a bias has one value per output")
    if op.type is not None and op.type.name == "logits":
        return logits(shape[0])
    return act(shape[0])


def _infer_rope(op, ctx):
    x = ctx.value_type(op.operands[0])
    hd = op.attrs["head_dim"]
    if x.width % hd:
        raise TypeRuleError(f"width {x.width} is not a multiple of head_dim {hd}", "rope rotates each head of head_dim channels")
    rope = op.attrs["rope"]
    if "type" not in rope or "theta" not in rope:
        raise TypeRuleError("rope attribute needs at least `type` and `theta`",
                            'e.g. rope = {theta = 10000.0, type = "default"}')
    theta = rope["theta"]
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not math.isfinite(theta) or theta <= 0:
        raise TypeRuleError(f"rope theta must be a finite number > 0, got {theta!r}",
                            "theta is the rotary base (rope_theta in config.json), e.g. 10000.0")
    for key, value in rope.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise TypeRuleError(f"rope {key} must be a finite number, got {value!r}", "fix the rope parameters")
    from ..rope_params import rope_problem
    problem = rope_problem(rope, hd)
    if problem:
        raise TypeRuleError(problem, "the rope parameters come from config.json's rope_parameters "
                                                "(re-run specir init for the checkpoint)")
    return x


def _infer_attention(op, ctx):
    q, k, v = (ctx.value_type(o) for o in op.operands[:3])
    a = op.attrs
    heads, kv_heads, hd = a["heads"], a["kv_heads"], a["head_dim"]
    if q.width != heads * hd:
        raise TypeRuleError(f"q is act<{q.width}> but heads * head_dim = {heads * hd}", "heads and head_dim must match the q projection")
    if k.width != kv_heads * hd or v.width != kv_heads * hd:
        raise TypeRuleError(f"k/v are act<{k.width}>/act<{v.width}> but kv_heads * head_dim = {kv_heads * hd}",
                            "kv_heads and head_dim must match the k and v projections")
    if heads % kv_heads:
        raise TypeRuleError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})",
                            "grouped-query attention shares each kv head among the same number of query heads")
    return act(heads * hd)


def _infer_same_width(op, ctx):
    a, b = (ctx.value_type(o) for o in op.operands)
    if a != b:
        raise TypeRuleError(f"operands have different types {a} and {b}", "both operands must have the same width")
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
                  {"weight": AttrSpec("str"), "eps": AttrSpec("float", doc="added to the mean square (rms_norm_eps), "
                                                               "e.g. 1e-6", valid=in_range(0, above=True)),
                   "group": AttrSpec("int", 0, doc="normalise each group of this many channels (qk-norm)",
                                     valid=in_range(0))},
                  _infer_norm, doc="RMSNorm, HF Llama numerics."))
register_op(OpDef("linear", "model", (value("x", "act"),),
                  {"weight": AttrSpec("str"), "bias": AttrSpec("str", "")}, _infer_linear_dtype,
                  doc="y = x @ W^T (+ b); W is [out, in]."))
register_op(OpDef("packed_linear", "model", (value("x", "act"),),
                  {"weight": AttrSpec("str"), "format": AttrSpec("str", choices=("bf12",)),
                   "bias": AttrSpec("str", "")}, _infer_packed_linear,
                  doc="linear over packed weights, decoded inside the kernel."))
register_op(OpDef("rope", "model", (value("x", "act"), value("positions", "positions")),
                  {"head_dim": AttrSpec("int", doc="channels per head", valid=in_range(1)), "rope": AttrSpec("dict", doc=ROPE_DOC)}, _infer_rope,
                  doc="Rotary embedding at absolute positions (rotate_half convention)."))
register_op(OpDef("attention", "model",
                  (value("q", "act"), value("k", "act"), value("v", "act"), value("mask", "mask")),
                  {"layer": AttrSpec("int", doc="KV-cache slot of this layer: the graph's attention ops are "
                                                 "layers 0, 1, ... n-1, each once", valid=in_range(0)),
                   "heads": AttrSpec("int", doc="query heads (num_attention_heads)", valid=in_range(1)),
                   "kv_heads": AttrSpec("int", doc="key/value heads (num_key_value_heads)", valid=in_range(1)),
                   "head_dim": AttrSpec("int", doc="channels per head", valid=in_range(1)),
                   "scale": AttrSpec("float", 0.0, doc="0 means 1/sqrt(head_dim)", valid=in_range(0)),
                   "window": AttrSpec("int", 0, doc="sliding window; 0 means none", valid=in_range(0))},
                  _infer_attention, pure=False, cache_layer="layer",
                  doc="Writes k/v to the layer's cache, attends over cache + new tokens under the mask."))
register_op(OpDef("swiglu", "model", (value("gate", "act"), value("up", "act")), {}, _infer_same_width,
                  doc="silu(gate) * up."))
register_op(OpDef("add", "model", (value("a", "act"), value("b", "act")), {}, _infer_same_width,
                  doc="Elementwise sum (residual)."))


def _token_ids(value) -> str | None:
    ok = all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**31 for t in value)
    return None if ok else "must be a list of token ids (integers >= 0)"


# Attributes of a model region the runtime reads (others are kept, unchecked but for their numbers).
MODEL_ATTRS: dict[str, AttrSpec] = {
    "source": AttrSpec("str", "", doc="the checkpoint folder (or zoo:NAME) the weights come from"),
    "family": AttrSpec("str", ""),
    "model_type": AttrSpec("str", ""),
    "dtype": AttrSpec("str", "bf16", choices=("bf16", "f16", "f32"), doc="the activation dtype"),
    "max_position": AttrSpec("int", 0, doc="the context length (max_position_embeddings)", valid=in_range(1)),
    "eos": AttrSpec("list", (), doc="end-of-sequence token ids", valid=_token_ids),
}


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
from . import ops_hybrid, ops_recurrent, ops_vocab  # noqa: E402,F401
