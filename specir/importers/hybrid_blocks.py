"""Blocks the hybrid importers share: the attention layers these families interleave with their
recurrent layers (optional output gate, zero-centred q/k norm, partial or no rotary embedding, key
and score multipliers) and their MLPs (gated, with muP multipliers; plain up/act/down; fused
gate-up). Each writes ops into a GraphBuilder and returns the block's output value."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.types import act
from .graph_builder import GraphBuilder

MROPE_KEYS = ("mrope_section", "mrope_interleaved")


def rope_of(config_dict: dict) -> dict:
    """The IR rope attribute of a config (llama importer's rules). Qwen3.5's M-RoPE keys are
    dropped: for text, its three position streams are the same positions, so it is plain RoPE."""
    from .llama import rope_attrs
    rope = rope_attrs(config_dict)
    for key in MROPE_KEYS:
        rope.pop(key, None)
    return rope


@dataclass(frozen=True)
class AttentionSpec:
    heads: int
    kv_heads: int
    head_dim: int
    rope: dict | None  # None: no rotary embedding (Nemotron-H, GraniteMoeHybrid with "nope")
    bias: bool = False  # q/k/v bias
    out_bias: bool = False
    scale: float = 0.0  # score scale; 0 means 1/sqrt(head_dim)
    qk_norm_eps: float | None = None  # zero-centred per-head q/k RMSNorm (Qwen3.5, Qwen3-Next)
    output_gate: bool = False  # q_proj also yields a per-head sigmoid gate on the output (Qwen3.5)
    key_multiplier: float = 1.0  # Falcon-H1


def attention_block(b: GraphBuilder, L: str, x: str, prefix: str, hidden: int, a: AttentionSpec) -> str:
    """The attention layer at `prefix`; its KV-cache layer is the next free one (attention layers
    are numbered 0..n-1 in graph order, whatever model layers they sit in)."""
    layer = sum(op.name == "attention" for op in b.ops)
    hd = a.head_dim
    qw, kw = a.heads * hd, a.kv_heads * hd
    gate = None
    if a.output_gate:  # q_proj rows per head: [query (hd), gate (hd)]
        qg = b.linear(f"{L}.qg", x, f"{prefix}.q_proj", 2 * qw, hidden, a.bias)
        q = b.op(f"{L}.q", "slice", qg, type_=act(qw), start=0, size=hd, group=2 * hd)
        gate = b.op(f"{L}.g", "slice", qg, type_=act(qw), start=hd, size=hd, group=2 * hd)
    else:
        q = b.linear(f"{L}.q", x, f"{prefix}.q_proj", qw, hidden, a.bias)
    k = b.linear(f"{L}.k", x, f"{prefix}.k_proj", kw, hidden, a.bias)
    v = b.linear(f"{L}.v", x, f"{prefix}.v_proj", kw, hidden, a.bias)
    k = b.scale(f"{L}.km", k, kw, a.key_multiplier)
    if a.qk_norm_eps is not None:
        q = b.op(f"{L}.qn", "rms_norm_1p", q, type_=act(qw), weight=b.w(f"{prefix}.q_norm.weight", hd),
                 eps=a.qk_norm_eps, group=hd)
        k = b.op(f"{L}.kn", "rms_norm_1p", k, type_=act(kw), weight=b.w(f"{prefix}.k_norm.weight", hd),
                 eps=a.qk_norm_eps, group=hd)
    if a.rope is not None:
        q = b.op(f"{L}.qr", "rope", q, "%pos", type_=act(qw), head_dim=hd, rope=a.rope)
        k = b.op(f"{L}.kr", "rope", k, "%pos", type_=act(kw), head_dim=hd, rope=a.rope)
    out = b.op(f"{L}.attn", "attention", q, k, v, "%mask", type_=act(qw), layer=layer, heads=a.heads,
               kv_heads=a.kv_heads, head_dim=hd, scale=float(a.scale))
    if gate is not None:
        sig = b.op(f"{L}.gs", "activation", gate, type_=act(qw), fn="sigmoid")
        out = b.op(f"{L}.gated", "mul", out, sig, type_=act(qw))
    return b.linear(f"{L}.o", out, f"{prefix}.o_proj", hidden, qw, a.out_bias)


def gated_mlp(b: GraphBuilder, L: str, x: str, prefix: str, hidden: int, inter: int, fn: str, bias: bool = False,
              gate_multiplier: float = 1.0, down_multiplier: float = 1.0) -> str:
    """down(fn(gate(x) * gate_multiplier) * up(x)) * down_multiplier."""
    gate = b.linear(f"{L}.gate", x, f"{prefix}.gate_proj", inter, hidden, bias)
    up = b.linear(f"{L}.up", x, f"{prefix}.up_proj", inter, hidden, bias)
    gate = b.scale(f"{L}.gm", gate, inter, gate_multiplier)
    h = _act_mul(b, L, gate, up, inter, fn)
    down = b.linear(f"{L}.down", h, f"{prefix}.down_proj", hidden, inter, bias)
    return b.scale(f"{L}.dm", down, hidden, down_multiplier)


def fused_gated_mlp(b: GraphBuilder, L: str, x: str, prefix: str, hidden: int, inter: int, fn: str) -> str:
    """GraniteMoeHybrid's shared MLP: input_linear rows [gate; up], output_linear."""
    both = b.linear(f"{L}.gu", x, f"{prefix}.input_linear", 2 * inter, hidden)
    gate = b.op(f"{L}.gate", "slice", both, type_=act(inter), start=0, size=inter)
    up = b.op(f"{L}.up", "slice", both, type_=act(inter), start=inter, size=inter)
    h = _act_mul(b, L, gate, up, inter, fn)
    return b.linear(f"{L}.down", h, f"{prefix}.output_linear", hidden, inter)


def plain_mlp(b: GraphBuilder, L: str, x: str, prefix: str, hidden: int, inter: int, fn: str, bias: bool) -> str:
    """Nemotron-H's MLP: down(fn(up(x)))."""
    up = b.linear(f"{L}.up", x, f"{prefix}.up_proj", inter, hidden, bias)
    h = b.op(f"{L}.act", "activation", up, type_=act(inter), fn=fn)
    return b.linear(f"{L}.down", h, f"{prefix}.down_proj", hidden, inter, bias)


def _act_mul(b, L, gate, up, inter, fn):
    if fn == "silu":
        return b.op(f"{L}.act", "swiglu", gate, up, type_=act(inter))
    a = b.op(f"{L}.act", "activation", gate, type_=act(inter), fn=fn)
    return b.op(f"{L}.mul", "mul", a, up, type_=act(inter))


def model_attrs(cfg, *, source: str, family: str, model_type: str, dtype: str) -> dict:
    eos = getattr(cfg, "eos_token_id", None)
    attrs = {"source": source, "family": family, "model_type": model_type, "dtype": dtype,
             "max_position": int(getattr(cfg, "max_position_embeddings", None) or 1 << 20)}
    if eos is not None:
        attrs["eos"] = tuple(int(e) for e in eos) if isinstance(eos, (list, tuple)) else (int(eos),)
    return attrs
