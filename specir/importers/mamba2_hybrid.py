"""Mamba2 hybrids: config.json -> model-graph IR for Bamba (`bamba`), Nemotron-H (`nemotron_h`,
its layer pattern of mamba / attention / MLP blocks), Falcon-H1 (`falcon_h1`: mamba and
attention side by side in every layer, its muP multipliers) and GraniteMoeHybrid's dense form
(`granitemoehybrid` with num_local_experts = 0: embedding / residual / attention multipliers,
logit scaling, optional rope).

The Mamba2 mixer: (x * ssm_in_multiplier) -> in_proj -> (* the five muP segment multipliers) ->
[gate z | xBC | dt] -> conv1d over xBC (state "conv") -> mamba2_scan (state "ssm"; dt clamped to
the time-step limit) -> gated RMSNorm with z (per group where the family groups it; Falcon-H1's
optional) -> out_proj. Attention layers reuse the attention op (rope partial where configured).
Refused with a SpecirError naming the key: MoE blocks, activations the ops lack, layer kinds
transformers does not build.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SourceLocation
from ..ir.nodes import Model
from ..ir.types import act, logits
from .checkpoint import TensorInfo
from .graph_builder import GraphBuilder
from .hf_config import hf_config, ir_activation
from .hybrid_blocks import AttentionSpec, attention_block, fused_gated_mlp, gated_mlp, model_attrs, plain_mlp, rope_of

MODEL_TYPES = ("bamba", "nemotron_h", "falcon_h1", "granitemoehybrid")


@dataclass(frozen=True)
class Mamba2Spec:
    hidden: int
    intermediate: int
    heads: int
    head_dim: int
    groups: int
    state: int
    kernel: int
    eps: float
    conv_bias: bool
    in_bias: bool
    out_bias: bool
    norm: bool = True  # gated RMSNorm (else y * silu(z))
    norm_group: int = 0  # channels per norm group; 0: the whole width
    gate_first: bool = True
    dt_min: float = 0.0
    dt_max: float = math.inf
    in_multiplier: float = 1.0
    segment_multipliers: tuple[float, ...] | None = None  # Falcon-H1 [z, x, B, C, dt]


def mamba2_mixer(b: GraphBuilder, L: str, x: str, p: str, layer: int, m: Mamba2Spec) -> str:
    I, H, GN = m.intermediate, m.heads, m.groups * m.state
    conv_dim = I + 2 * GN
    width = I + conv_dim + H
    if m.heads * m.head_dim != I:
        raise b.refuse(f"mamba heads ({m.heads}) x head_dim ({m.head_dim}) != intermediate size ({I})",
                       "mamba_n_heads", "the Mamba2 mixer splits its intermediate size into heads")
    x = b.scale(f"{L}.sin", x, m.hidden, m.in_multiplier)
    proj = b.linear(f"{L}.proj", x, f"{p}.in_proj", width, m.hidden, m.in_bias)
    if m.segment_multipliers is not None and any(float(f) != 1.0 for f in m.segment_multipliers):
        proj = b.op(f"{L}.mup", "scale", proj, type_=act(width), segments=[I, I, GN, GN, H],
                    factors=[float(f) for f in m.segment_multipliers])
    gate = b.op(f"{L}.z", "slice", proj, type_=act(I), start=0, size=I)
    xbc = b.op(f"{L}.xbc", "slice", proj, type_=act(conv_dim), start=I, size=conv_dim)
    dt = b.op(f"{L}.dt", "slice", proj, type_=act(H), start=I + conv_dim, size=H)
    conv = b.op(f"{L}.conv", "conv1d", xbc, "%mask", type_=act(conv_dim), layer=layer, state="conv",
                weight=b.w(f"{p}.conv1d.weight", conv_dim, 1, m.kernel),
                bias=b.w(f"{p}.conv1d.bias", conv_dim) if m.conv_bias else None,
                kernel=m.kernel, channels=conv_dim, activation="silu")
    y = b.op(f"{L}.ssm", "mamba2_scan", conv, dt, "%mask", type_=act(I), layer=layer, state="ssm",
             a_log=b.w(f"{p}.A_log", H), d=b.w(f"{p}.D", H), dt_bias=b.w(f"{p}.dt_bias", H), heads=H,
             head_dim=m.head_dim, groups=m.groups, state_size=m.state, dt_min=float(m.dt_min), dt_max=float(m.dt_max))
    if m.norm:
        y = b.op(f"{L}.norm", "rms_norm_gated", y, gate, type_=act(I), weight=b.w(f"{p}.norm.weight", I),
                 eps=m.eps, group=0 if m.norm_group in (0, I) else m.norm_group, gate_first=m.gate_first)
    else:
        sz = b.op(f"{L}.zs", "activation", gate, type_=act(I), fn="silu")
        y = b.op(f"{L}.gated", "mul", y, sz, type_=act(I))
    return b.linear(f"{L}.out_proj", y, f"{p}.out_proj", m.hidden, I, m.out_bias)


def _dt_limit(b, cfg, key="time_step_limit") -> tuple[float, float]:
    limit = getattr(cfg, key, None)
    if limit is None:
        return 0.0, math.inf
    lo, hi = (float(v) for v in limit)
    if lo > hi:
        raise b.refuse(f"{key} = {list(limit)} has its minimum above its maximum", key, "give (min, max)")
    return lo, hi


def _conv_act(b, name, key):
    fn = ir_activation(name, key, b)
    if fn != "silu":
        raise b.refuse(f"the Mamba2 convolution applies {key} = {name!r}; specir's conv1d implements silu", key,
                       'use "silu" (every released checkpoint of these families)')
    return fn


def _head(b, cfg, embed, hn, vocab, hidden, tie=True):
    tied = tie and bool(getattr(cfg, "tie_word_embeddings", False))
    head = embed if tied else b.w("lm_head.weight", vocab, hidden)
    return b.op("%logits", "linear", hn, type_=logits(vocab), weight=head)


def _finish(b, cfg, name, source, model_type, embed, vocab, result="%logits"):
    attrs = model_attrs(cfg, source=source, family="mamba2_hybrid", model_type=model_type,
                        dtype=b.weights[embed].dtype)
    return b.model(name, result, vocab, attrs)


def _attention(cfg, rope=True, scale=0.0, key_multiplier=1.0, bias=None):
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    bias = bool(getattr(cfg, "attention_bias", False)) if bias is None else bias
    return AttentionSpec(heads=heads, kv_heads=cfg.num_key_value_heads or heads, head_dim=head_dim,
                         rope=rope_of(cfg.to_dict()) if rope else None, bias=bias, out_bias=bias,
                         scale=float(scale), key_multiplier=float(key_multiplier))


# ---------------------------------------------------------------------- families

def _bamba(b, cfg, name, source, model_type):
    hidden, vocab, eps = cfg.hidden_size, cfg.vocab_size, float(cfg.rms_norm_eps)
    fn = ir_activation(cfg.hidden_act, "hidden_act", b)
    _conv_act(b, cfg.hidden_act, "hidden_act")
    lo, hi = _dt_limit(b, cfg)
    mix = Mamba2Spec(hidden, int(cfg.mamba_expand * hidden), cfg.mamba_n_heads, cfg.mamba_d_head, cfg.mamba_n_groups,
                     cfg.mamba_d_state, cfg.mamba_d_conv, eps, bool(cfg.mamba_conv_bias), bool(cfg.mamba_proj_bias),
                     bool(cfg.mamba_proj_bias), dt_min=lo, dt_max=hi)
    attn = _attention(cfg)
    embed = b.w("model.embed_tokens.weight", vocab, hidden)
    h = b.op("%h", "embed", "%ids", type_=act(hidden), weight=embed)
    for i, kind in enumerate(cfg.layers_block_type):
        p, L = f"model.layers.{i}", f"%l{i}"
        x = b.op(f"{L}.in", "rms_norm", h, type_=act(hidden), weight=b.w(f"{p}.input_layernorm.weight", hidden), eps=eps)
        mixed = _mamba_or_attention(b, L, x, p, i, kind, mix, attn, hidden,
                                    ("attn_layer_indices", "bamba layers are mamba or attention"))
        r = b.op(f"{L}.res", "add", h, mixed, type_=act(hidden))
        y = b.op(f"{L}.post", "rms_norm", r, type_=act(hidden), weight=b.w(f"{p}.pre_ff_layernorm.weight", hidden),
                 eps=eps)
        d = gated_mlp(b, L, y, f"{p}.feed_forward", hidden, cfg.intermediate_size, fn, bool(cfg.mlp_bias))
        h = b.op(f"{L}.out", "add", r, d, type_=act(hidden))
    hn = b.op("%norm", "rms_norm", h, type_=act(hidden), weight=b.w("model.final_layernorm.weight", hidden), eps=eps)
    _head(b, cfg, embed, hn, vocab, hidden)
    return _finish(b, cfg, name, source, model_type, embed, vocab)


def _nemotron_h(b, cfg, name, source, model_type):
    hidden, vocab, eps = cfg.hidden_size, cfg.vocab_size, float(cfg.layer_norm_epsilon)
    _conv_act(b, cfg.mamba_hidden_act, "mamba_hidden_act")
    mlp_fn = ir_activation(cfg.mlp_hidden_act, "mlp_hidden_act", b)
    inter_m = cfg.mamba_num_heads * cfg.mamba_head_dim
    if inter_m % cfg.n_groups:
        raise b.refuse(f"the mamba intermediate size {inter_m} is not a multiple of n_groups {cfg.n_groups}",
                       "n_groups", "the gated norm normalises intermediate / n_groups channels per group")
    # transformers' NemotronHMamba2Mixer clamps dt to (time_step_min, inf), whatever time_step_limit says
    mix = Mamba2Spec(hidden, inter_m, cfg.mamba_num_heads, cfg.mamba_head_dim, cfg.n_groups, cfg.ssm_state_size,
                     cfg.conv_kernel, eps, bool(cfg.use_conv_bias), bool(cfg.use_bias), bool(cfg.use_bias),
                     norm_group=inter_m // cfg.n_groups, dt_min=float(cfg.time_step_min))
    attn = _attention(cfg, rope=False, bias=False)  # NemotronHAttention: no rope, no bias
    top = "backbone" if b.has("backbone.embeddings.weight") else "model"  # transformers saves backbone.*
    embed = b.w(f"{top}.embeddings.weight", vocab, hidden)
    h = b.op("%h", "embed", "%ids", type_=act(hidden), weight=embed)
    for i, kind in enumerate(cfg.layers_block_type):
        p, L = f"{top}.layers.{i}", f"%l{i}"
        x = b.op(f"{L}.in", "rms_norm", h, type_=act(hidden), weight=b.w(f"{p}.norm.weight", hidden), eps=eps)
        if kind == "linear_attention":
            mixed = mamba2_mixer(b, L, x, f"{p}.mixer", i, mix)
        elif kind == "full_attention":
            mixed = attention_block(b, L, x, f"{p}.mixer", hidden, attn)
        elif kind == "mlp":
            mixed = plain_mlp(b, L, x, f"{p}.mixer", hidden, cfg.intermediate_size, mlp_fn, bool(cfg.mlp_bias))
        elif kind == "moe":
            raise b.refuse(f"layer {i} is a mixture-of-experts block, which specir does not import yet",
                           "layers_block_type", "Nemotron-H checkpoints with 'E' / moe blocks do not import; "
                                                "mamba, attention and mlp blocks do")
        else:
            raise b.refuse(f"layer {i} has type {kind!r}", "layers_block_type",
                           "supported: linear_attention (M), full_attention (*), mlp (-)")
        h = b.op(f"{L}.out", "add", h, mixed, type_=act(hidden))
    hn = b.op("%norm", "rms_norm", h, type_=act(hidden), weight=b.w(f"{top}.norm_f.weight", hidden), eps=eps)
    _head(b, cfg, embed, hn, vocab, hidden, tie=False)  # NemotronHForCausalLM ties nothing
    return _finish(b, cfg, name, source, model_type, embed, vocab)


def _falcon_h1(b, cfg, name, source, model_type):
    hidden, vocab, eps = cfg.hidden_size, cfg.vocab_size, float(cfg.rms_norm_eps)
    fn = ir_activation(cfg.hidden_act, "hidden_act", b)
    _conv_act(b, cfg.hidden_act, "hidden_act")
    lo, hi = _dt_limit(b, cfg)
    inter_m = cfg.mamba_d_ssm if cfg.mamba_d_ssm is not None else int(cfg.mamba_expand * hidden)
    if cfg.mamba_rms_norm and inter_m % cfg.mamba_n_groups:
        raise b.refuse(f"mamba_d_ssm {inter_m} is not a multiple of mamba_n_groups {cfg.mamba_n_groups}",
                       "mamba_n_groups", "the gated norm normalises d_ssm / n_groups channels per group")
    mults = tuple(cfg.ssm_multipliers or (1.0,) * 5)
    if len(mults) != 5:
        raise b.refuse(f"ssm_multipliers has {len(mults)} values", "ssm_multipliers",
                       "five multipliers: z, x, B, C, dt")
    mix = Mamba2Spec(hidden, inter_m, cfg.mamba_n_heads, cfg.mamba_d_head, cfg.mamba_n_groups, cfg.mamba_d_state,
                     cfg.mamba_d_conv, eps, bool(cfg.mamba_conv_bias), bool(cfg.mamba_proj_bias),
                     bool(cfg.projectors_bias), norm=bool(cfg.mamba_rms_norm),
                     norm_group=inter_m // cfg.mamba_n_groups, gate_first=not cfg.mamba_norm_before_gate,
                     dt_min=lo, dt_max=hi, in_multiplier=float(cfg.ssm_in_multiplier), segment_multipliers=mults)
    attn = _attention(cfg, key_multiplier=cfg.key_multiplier)
    gate_m, down_m = (float(v) for v in (cfg.mlp_multipliers or (1.0, 1.0)))
    embed = b.w("model.embed_tokens.weight", vocab, hidden)
    h = b.op("%h", "embed", "%ids", type_=act(hidden), weight=embed)
    h = b.scale("%h.m", h, hidden, cfg.embedding_multiplier)
    for i in range(cfg.num_hidden_layers):
        p, L = f"model.layers.{i}", f"%l{i}"
        x = b.op(f"{L}.in", "rms_norm", h, type_=act(hidden), weight=b.w(f"{p}.input_layernorm.weight", hidden), eps=eps)
        m = mamba2_mixer(b, L + ".m", x, f"{p}.mamba", i, mix)
        m = b.scale(f"{L}.mo", m, hidden, cfg.ssm_out_multiplier)
        xa = b.scale(f"{L}.ai", x, hidden, cfg.attention_in_multiplier)
        a = attention_block(b, L + ".a", xa, f"{p}.self_attn", hidden, attn)
        a = b.scale(f"{L}.ao", a, hidden, cfg.attention_out_multiplier)
        both = b.op(f"{L}.mix", "add", m, a, type_=act(hidden))
        r = b.op(f"{L}.res", "add", h, both, type_=act(hidden))
        y = b.op(f"{L}.post", "rms_norm", r, type_=act(hidden), weight=b.w(f"{p}.pre_ff_layernorm.weight", hidden),
                 eps=eps)
        d = gated_mlp(b, L, y, f"{p}.feed_forward", hidden, cfg.intermediate_size, fn, bool(cfg.mlp_bias),
                      gate_multiplier=gate_m, down_multiplier=down_m)
        h = b.op(f"{L}.out", "add", r, d, type_=act(hidden))
    hn = b.op("%norm", "rms_norm", h, type_=act(hidden), weight=b.w("model.final_layernorm.weight", hidden), eps=eps)
    out = _head(b, cfg, embed, hn, vocab, hidden)
    if float(cfg.lm_head_multiplier) != 1.0:
        out = b.op("%logits.m", "scale", out, type_=logits(vocab), factor=float(cfg.lm_head_multiplier))
    return _finish(b, cfg, name, source, model_type, embed, vocab, out)


def _granite(b, cfg, name, source, model_type):
    hidden, vocab, eps = cfg.hidden_size, cfg.vocab_size, float(cfg.rms_norm_eps)
    if int(getattr(cfg, "num_local_experts", 0) or 0) > 0:
        raise b.refuse(f"num_local_experts = {cfg.num_local_experts}: the mixture-of-experts form is not imported "
                       "yet", "num_local_experts", "GraniteMoeHybrid's dense form (num_local_experts = 0) imports")
    fn = ir_activation(cfg.hidden_act, "hidden_act", b)
    _conv_act(b, cfg.hidden_act, "hidden_act")
    lo, hi = _dt_limit(b, cfg)
    mix = Mamba2Spec(hidden, int(cfg.mamba_expand * hidden), cfg.mamba_n_heads, cfg.mamba_d_head, cfg.mamba_n_groups,
                     cfg.mamba_d_state, cfg.mamba_d_conv, eps, bool(cfg.mamba_conv_bias), bool(cfg.mamba_proj_bias),
                     bool(cfg.mamba_proj_bias), dt_min=lo, dt_max=hi)
    pos = getattr(cfg, "position_embedding_type", "rope")
    if pos not in ("rope", None, "nope"):
        raise b.refuse(f"position_embedding_type {pos!r} is not supported", "position_embedding_type",
                       'use "rope" or none (no positional embedding)')
    attn = _attention(cfg, rope=pos == "rope", scale=cfg.attention_multiplier)
    res_m = float(cfg.residual_multiplier)
    embed = b.w("model.embed_tokens.weight", vocab, hidden)
    h = b.op("%h", "embed", "%ids", type_=act(hidden), weight=embed)
    h = b.scale("%h.m", h, hidden, cfg.embedding_multiplier)
    for i, kind in enumerate(cfg.layers_block_type):
        p, L = f"model.layers.{i}", f"%l{i}"
        x = b.op(f"{L}.in", "rms_norm", h, type_=act(hidden), weight=b.w(f"{p}.input_layernorm.weight", hidden), eps=eps)
        mixed = _mamba_or_attention(b, L, x, p, i, kind, mix, attn, hidden,
                                    ("layer_types", "supported: mamba, attention"))
        mixed = b.scale(f"{L}.rm", mixed, hidden, res_m)
        r = b.op(f"{L}.res", "add", h, mixed, type_=act(hidden))
        y = b.op(f"{L}.post", "rms_norm", r, type_=act(hidden),
                 weight=b.w(f"{p}.post_attention_layernorm.weight", hidden), eps=eps)
        d = fused_gated_mlp(b, L, y, f"{p}.shared_mlp", hidden, cfg.shared_intermediate_size, fn)
        d = b.scale(f"{L}.dm", d, hidden, res_m)
        h = b.op(f"{L}.out", "add", r, d, type_=act(hidden))
    hn = b.op("%norm", "rms_norm", h, type_=act(hidden), weight=b.w("model.norm.weight", hidden), eps=eps)
    out = _head(b, cfg, embed, hn, vocab, hidden)
    if float(cfg.logits_scaling) != 1.0:
        out = b.op("%logits.s", "scale", out, type_=logits(vocab), divisor=float(cfg.logits_scaling))
    return _finish(b, cfg, name, source, model_type, embed, vocab, out)


FAMILIES = {"bamba": _bamba, "nemotron_h": _nemotron_h, "falcon_h1": _falcon_h1, "granitemoehybrid": _granite}


def build_mamba2_hybrid(config: dict, tensors: dict[str, TensorInfo], *, name: str, source: str,
                        where: SourceLocation | None = None, config_path: str | None = None) -> Model:
    model_type = config.get("model_type")
    cfg = hf_config(config, where=where, path=config_path)
    b = GraphBuilder(tensors, source=source, where=where, config_path=config_path)
    return FAMILIES[model_type](b, cfg, name, source, model_type)


def _mamba_or_attention(b, L, x, p, i, kind, mix, attn, hidden, refusal):
    """Layer i's mixer where its weights sit at {p}.mamba / {p}.self_attn (Bamba, GraniteMoeHybrid);
    any other layer kind is refused naming the config key and hint of `refusal`."""
    if kind == "linear_attention":
        return mamba2_mixer(b, L, x, f"{p}.mamba", i, mix)
    if kind == "full_attention":
        return attention_block(b, L, x, f"{p}.self_attn", hidden, attn)
    key, hint = refusal
    raise b.refuse(f"layer {i} has type {kind!r}", key, hint)
