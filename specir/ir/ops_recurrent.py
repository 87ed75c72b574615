"""Recurrent model-graph ops: the short causal convolution and the two state-space recurrences
(Gated DeltaNet's delta rule, Mamba2's selective scan), with their state NAMED in the IR.

Every recurrent op carries `layer` (its state slot, like attention's KV-cache slot) and `state`
(the state's name in that slot: "conv", "delta", "ssm"); (layer, state) is unique per model.
Its definition is a `RecurrentOpDef`, whose `states(attrs)` interface gives the shapes the
runtime's state store allocates per request slot (specir/runtime/recurrent_state.py).

Semantics over a forward of new tokens (chain or tree), per request: token t's state derives
from its PARENT's state, the parent being the nearest earlier token the `mask` operand shows it
(for mask<causal>, the token before; for mask<tree>, the tree parent); a token with no visible
earlier new token starts from the committed state. Every token's state after it is kept for
`commit` (runtime: commit the state of the last accepted node). So rewriting the mask to
mask<tree> (tree-verify) turns these ops into per-node-state tree verification.

| op | operands | state per slot | result |
|---|---|---|---|
| `conv1d` | x act<C>, mask | conv: [C, kernel - 1], model dtype | act<C> |
| `gated_delta_rule` | qkv act<2*Hk*Dk + Hv*Dv>, b act<Hv>, a act<Hv>, mask | delta: [Hv, Dk, Dv] fp32 | act<Hv*Dv> |
| `mamba2_scan` | xbc act<H*P + 2*G*N>, dt act<H>, mask | ssm: [H, P, N] fp32 | act<H*P> |
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .opdefs import OPS, AttrSpec, OpDef, TypeRuleError, register_op, value
from .types import act


@dataclass(frozen=True)
class StateSpec:
    """One named recurrent state of a layer: `shape` per request slot; dtype "act" (the model's
    activation dtype) or "f32"."""

    layer: int
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class RecurrentOpDef(OpDef):
    """An op that reads and writes recurrent state; `states(attrs)` names and sizes it."""

    states: Callable[..., tuple[StateSpec, ...]] = lambda attrs: ()


def state_specs(op) -> tuple[StateSpec, ...]:
    """The states an op reads and writes (none for ops that are not recurrent)."""
    opdef = OPS.get(op.name)
    return opdef.states(op.attrs) if isinstance(opdef, RecurrentOpDef) else ()


def mixes_tokens(op) -> bool:
    """Whether `op` carries state from token to token of a request: its definition names a KV-cache
    layer (attention) or declares recurrent states (conv, SSM, delta rule)."""
    opdef = OPS.get(op.name)
    return bool(getattr(opdef, "cache_layer", None)) or bool(state_specs(op))


def model_state_specs(model) -> list[StateSpec]:
    """The states of every recurrent op of a model region, in graph order (empty: not recurrent)."""
    return [spec for op in model.graph.ops for spec in state_specs(op)]


def weight_attrs(op) -> tuple[str, ...]:
    """Attributes of `op` besides weight/bias whose values name weights (resolved by the runner)."""
    opdef = OPS.get(op.name)
    return opdef.weight_keys if opdef is not None else ()


def weights_read(op) -> set[str]:
    """The names of the weights `op` reads: its weight and bias, and the attributes its definition names."""
    keys = ("weight", "bias") + weight_attrs(op)
    return {v for k, v in op.attrs.items() if k in keys and isinstance(v, str)}


def _slot_attrs(default_state: str) -> dict:
    return {"layer": AttrSpec("int", doc="recurrent-state slot of this layer"),
            "state": AttrSpec("str", default_state, doc="the state's name in its slot")}


def _weight(ctx, op, key, shape):
    got = ctx.weight_type(op, op.attrs[key]).shape
    if got != shape:
        raise TypeRuleError(f"weight {op.attrs[key]!r} ({key}) has shape {list(got)}, expected {list(shape)}",
                            "the checkpoint's tensor and the op's attributes must agree; re-import the model")


def _infer_conv(op, ctx):
    x = ctx.value_type(op.operands[0])
    c, k = op.attrs["channels"], op.attrs["kernel"]
    if x.width != c:
        raise TypeRuleError(f"x is act<{x.width}> but channels = {c}", "set channels to the width of the conv input")
    if k < 1:
        raise TypeRuleError(f"kernel must be at least 1, got {k}", "the causal conv kernel size, e.g. kernel = 4")
    _weight(ctx, op, "weight", (c, 1, k))
    if op.attrs.get("bias"):
        _weight(ctx, op, "bias", (c,))
    return x


def _infer_delta(op, ctx):
    qkv, b, a = (ctx.value_type(o) for o in op.operands[:3])
    at = op.attrs
    hk, hv, dk, dv = at["k_heads"], at["v_heads"], at["k_dim"], at["v_dim"]
    if hv % hk:
        raise TypeRuleError(f"v_heads ({hv}) must be a multiple of k_heads ({hk})", "value heads are grouped over key heads")
    if qkv.width != 2 * hk * dk + hv * dv:
        raise TypeRuleError(f"qkv is act<{qkv.width}> but 2 * k_heads * k_dim + v_heads * v_dim = "
                            f"{2 * hk * dk + hv * dv}", "the fused q, k, v projection's width")
    if b.width != hv or a.width != hv:
        raise TypeRuleError(f"b and a must be act<{hv}> (one per value head), got {b} and {a}",
                            "b and a come from the beta and alpha projections, one value per value head")
    _weight(ctx, op, "a_log", (hv,))
    _weight(ctx, op, "dt_bias", (hv,))
    return act(hv * dv)


def _infer_mamba2(op, ctx):
    xbc, dt = (ctx.value_type(o) for o in op.operands[:2])
    at = op.attrs
    h, p, g, n = at["heads"], at["head_dim"], at["groups"], at["state_size"]
    if h % g:
        raise TypeRuleError(f"heads ({h}) must be a multiple of groups ({g})", "heads are grouped over the B/C groups")
    if xbc.width != h * p + 2 * g * n:
        raise TypeRuleError(f"xbc is act<{xbc.width}> but heads * head_dim + 2 * groups * state_size = "
                            f"{h * p + 2 * g * n}", "the conv output holds x, B and C")
    if dt.width != h:
        raise TypeRuleError(f"dt must be act<{h}> (one per head), got {dt}", "dt comes from the in-projection, one value per head")
    if not at.get("dt_min", 0.0) <= at.get("dt_max", float("inf")):
        raise TypeRuleError("dt_min must not exceed dt_max", "e.g. dt_min = 0.0, dt_max = inf")
    for key in ("a_log", "d", "dt_bias"):
        _weight(ctx, op, key, (h,))
    return act(h * p)


register_op(RecurrentOpDef(
    "conv1d", "model", (value("x", "act"), value("mask", "mask")),
    {**_slot_attrs("conv"), "weight": AttrSpec("str", doc="[channels, 1, kernel] (torch Conv1d, depthwise)"),
     "bias": AttrSpec("str", ""), "kernel": AttrSpec("int"), "channels": AttrSpec("int"),
     "activation": AttrSpec("str", "none", choices=("none", "silu"))},
    _infer_conv, pure=False,
    states=lambda a: (StateSpec(a["layer"], a.get("state", "conv"), (a["channels"], a["kernel"] - 1), "act"),),
    doc="Depthwise causal convolution over each token's path: y = act(sum_j w[:, j] * x[path_{K-1-j}] + b), "
        "the `kernel - 1` inputs before a token coming from its parent's window (committed: the last "
        "inputs of the committed sequence, zeros at the start). Computed in the model dtype."))
register_op(RecurrentOpDef(
    "gated_delta_rule", "model",
    (value("qkv", "act"), value("b", "act"), value("a", "act"), value("mask", "mask")),
    {**_slot_attrs("delta"), "a_log": AttrSpec("str", doc="A_log [v_heads]"),
     "dt_bias": AttrSpec("str", doc="dt_bias [v_heads]"), "k_heads": AttrSpec("int"), "v_heads": AttrSpec("int"),
     "k_dim": AttrSpec("int"), "v_dim": AttrSpec("int")},
    _infer_delta, pure=False, weight_keys=("a_log", "dt_bias"),
    states=lambda a: (StateSpec(a["layer"], a.get("state", "delta"), (a["v_heads"], a["k_dim"], a["v_dim"]),
                                "f32"),),
    doc="Gated delta rule (Gated DeltaNet): q, k, v = split(qkv); q, k L2-normalised (eps 1e-6) and repeated "
        "to the value heads (value head h reads key head h // (v_heads / k_heads)); q *= k_dim^-0.5; "
        "beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias); per token S = S * exp(g); "
        "S += k (beta * (v - S^T k))^T; out = S^T q. fp32 state and arithmetic, output cast once."))
register_op(RecurrentOpDef(
    "mamba2_scan", "model", (value("xbc", "act"), value("dt", "act"), value("mask", "mask")),
    {**_slot_attrs("ssm"), "a_log": AttrSpec("str", doc="A_log [heads]"), "d": AttrSpec("str", doc="D [heads]"),
     "dt_bias": AttrSpec("str", doc="dt_bias [heads]"), "heads": AttrSpec("int"), "head_dim": AttrSpec("int"),
     "groups": AttrSpec("int"), "state_size": AttrSpec("int"),
     "dt_min": AttrSpec("float", 0.0, doc="lower clamp of softplus(dt + dt_bias)"),
     "dt_max": AttrSpec("float", float("inf"), doc="upper clamp of softplus(dt + dt_bias)")},
    _infer_mamba2, pure=False, weight_keys=("a_log", "d", "dt_bias"),
    states=lambda a: (StateSpec(a["layer"], a.get("state", "ssm"), (a["heads"], a["head_dim"], a["state_size"]),
                                "f32"),),
    doc="Mamba2 selective scan (SSD): x, B, C = split(xbc) (head h reads group h // (heads / groups)); "
        "dt = clamp(softplus(dt + dt_bias), dt_min, dt_max); per token h = h * exp(-exp(A_log) dt) + "
        "dt * x B^T; y = h C + D x. The clamp applies to every token (transformers applies it in its "
        "multi-token path, the one token forcing judges by). fp32 state and arithmetic, output cast once."))
