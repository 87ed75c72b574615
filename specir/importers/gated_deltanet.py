"""Gated DeltaNet hybrids: config.json -> model-graph IR for Qwen3.5 text models (`qwen3_5_text`,
and the text model of a `qwen3_5` checkpoint, weights under model.language_model) and Qwen3-Next
(`qwen3_next`, dense MLP layers).

Per layer (config.layer_types): zero-centred RMSNorm, then either
- linear_attention: qkv projection -> conv1d (state "conv", silu) -> gated_delta_rule (state
  "delta") with beta = sigmoid(b), decay from a, A_log, dt_bias -> per-head gated RMSNorm with
  z -> out_proj. Qwen3-Next packs q, k, v, z per key head in in_proj_qkvz and b, a in
  in_proj_ba; the graph slices them apart;
- full_attention: q_proj with a per-head output gate, zero-centred per-head q/k RMSNorm,
  partial rotary embedding, GQA attention, sigmoid(gate) * output, o_proj;
then the residual, a second norm, the SwiGLU MLP and its residual. Final norm, lm_head (or the
tied embedding). Qwen3-Next's sparse MoE layers are refused (config key num_experts).
"""
from __future__ import annotations

from ..errors import SourceLocation
from ..ir.nodes import Model
from ..ir.types import act, logits
from .checkpoint import TensorInfo
from .graph_builder import GraphBuilder
from .hf_config import hf_config, ir_activation
from .hybrid_blocks import AttentionSpec, attention_block, gated_mlp, model_attrs, rope_of

MODEL_TYPES = ("qwen3_5", "qwen3_5_text", "qwen3_next")
LAYER_KINDS = ("linear_attention", "full_attention")


def _moe_layers(cfg) -> list[int]:
    """Layers transformers builds with Qwen3NextSparseMoeBlock."""
    experts = int(getattr(cfg, "num_experts", 0) or 0)
    if experts <= 0:
        return []
    step = int(getattr(cfg, "decoder_sparse_step", 1) or 1)
    dense = set(getattr(cfg, "mlp_only_layers", None) or [])
    return [i for i in range(cfg.num_hidden_layers) if i not in dense and (i + 1) % step == 0]


def build_gated_deltanet(config: dict, tensors: dict[str, TensorInfo], *, name: str, source: str,
                         where: SourceLocation | None = None, config_path: str | None = None) -> Model:
    model_type = config.get("model_type")
    full = hf_config(config, where=where, path=config_path)
    cfg = full.get_text_config() if model_type == "qwen3_5" else full
    b = GraphBuilder(tensors, source=source, where=where, config_path=config_path)
    prefix = "model.language_model" if b.has("model.language_model.embed_tokens.weight") else "model"

    hidden, layers, vocab = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    eps = float(cfg.rms_norm_eps)
    kinds = list(cfg.layer_types)[:layers]
    for i, kind in enumerate(kinds):
        if kind not in LAYER_KINDS:
            raise b.refuse(f"layer {i} has type {kind!r}", "layer_types", "supported: " + ", ".join(LAYER_KINDS))
    moe = _moe_layers(cfg)
    if moe:
        raise b.refuse(f"layers {moe} use the sparse mixture-of-experts MLP, which specir does not import yet",
                       "num_experts", "a dense Qwen3-Next (num_experts = 0, or every layer in mlp_only_layers) "
                                      "imports; MoE layers do not")
    fn = ir_activation(cfg.hidden_act, "hidden_act", b)
    if fn != "silu":
        raise b.refuse(f"Gated DeltaNet's convolution applies hidden_act = {cfg.hidden_act!r}; specir's conv1d "
                       "implements silu", "hidden_act", "use hidden_act = \"silu\" (every released Qwen3.5/Next)")
    hk, hv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
    dk, dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
    if hv % hk:
        raise b.refuse(f"linear_num_value_heads ({hv}) is not a multiple of linear_num_key_heads ({hk})",
                       "linear_num_value_heads", "value heads are grouped over key heads")
    kernel = int(cfg.linear_conv_kernel_dim)
    key_dim, value_dim = hk * dk, hv * dv
    conv_dim = 2 * key_dim + value_dim
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    attn = AttentionSpec(heads=heads, kv_heads=kv_heads, head_dim=head_dim, rope=rope_of(cfg.to_dict()),
                         bias=bool(cfg.attention_bias), out_bias=bool(cfg.attention_bias), qk_norm_eps=eps,
                         output_gate=True)
    qwen3_next = model_type == "qwen3_next"

    embed = b.w(f"{prefix}.embed_tokens.weight", vocab, hidden)
    h = b.op("%h", "embed", "%ids", type_=act(hidden), weight=embed)
    for i, kind in enumerate(kinds):
        p, L = f"{prefix}.layers.{i}", f"%l{i}"
        x = b.op(f"{L}.in", "rms_norm_1p", h, type_=act(hidden), weight=b.w(f"{p}.input_layernorm.weight", hidden),
                 eps=eps)
        if kind == "linear_attention":
            la = f"{p}.linear_attn"
            if qwen3_next:
                r = hv // hk
                group = 2 * dk + 2 * r * dv
                qkvz = b.linear(f"{L}.qkvz", x, f"{la}.in_proj_qkvz", 2 * key_dim + 2 * value_dim, hidden)
                q = b.op(f"{L}.q", "slice", qkvz, type_=act(key_dim), start=0, size=dk, group=group)
                k = b.op(f"{L}.k", "slice", qkvz, type_=act(key_dim), start=dk, size=dk, group=group)
                v = b.op(f"{L}.v", "slice", qkvz, type_=act(value_dim), start=2 * dk, size=r * dv, group=group)
                z = b.op(f"{L}.z", "slice", qkvz, type_=act(value_dim), start=2 * dk + r * dv, size=r * dv,
                         group=group)
                qkv = b.op(f"{L}.qkv", "concat", q, k, v, type_=act(conv_dim))
                ba = b.linear(f"{L}.ba", x, f"{la}.in_proj_ba", 2 * hv, hidden)
                beta_in = b.op(f"{L}.b", "slice", ba, type_=act(hv), start=0, size=r, group=2 * r)
                decay_in = b.op(f"{L}.a", "slice", ba, type_=act(hv), start=r, size=r, group=2 * r)
            else:
                qkv = b.linear(f"{L}.qkv", x, f"{la}.in_proj_qkv", conv_dim, hidden)
                z = b.linear(f"{L}.z", x, f"{la}.in_proj_z", value_dim, hidden)
                beta_in = b.linear(f"{L}.b", x, f"{la}.in_proj_b", hv, hidden)
                decay_in = b.linear(f"{L}.a", x, f"{la}.in_proj_a", hv, hidden)
            conv = b.op(f"{L}.conv", "conv1d", qkv, "%mask", type_=act(conv_dim), layer=i, state="conv",
                        weight=b.w(f"{la}.conv1d.weight", conv_dim, 1, kernel),
                        bias=b.w(f"{la}.conv1d.bias", conv_dim, optional=True), kernel=kernel, channels=conv_dim,
                        activation="silu")
            core = b.op(f"{L}.delta", "gated_delta_rule", conv, beta_in, decay_in, "%mask", type_=act(value_dim),
                        layer=i, state="delta", a_log=b.w(f"{la}.A_log", hv), dt_bias=b.w(f"{la}.dt_bias", hv),
                        k_heads=hk, v_heads=hv, k_dim=dk, v_dim=dv)
            normed = b.op(f"{L}.norm", "rms_norm_gated", core, z, type_=act(value_dim),
                          weight=b.w(f"{la}.norm.weight", dv), eps=eps, group=dv, gate_first=False)
            mixed = b.linear(f"{L}.o", normed, f"{la}.out_proj", hidden, value_dim)
        else:
            mixed = attention_block(b, L, x, f"{p}.self_attn", hidden, attn)
        r_ = b.op(f"{L}.res", "add", h, mixed, type_=act(hidden))
        y = b.op(f"{L}.post", "rms_norm_1p", r_, type_=act(hidden),
                 weight=b.w(f"{p}.post_attention_layernorm.weight", hidden), eps=eps)
        d = gated_mlp(b, L, y, f"{p}.mlp", hidden, cfg.intermediate_size, fn)
        h = b.op(f"{L}.out", "add", r_, d, type_=act(hidden))
    hn = b.op("%norm", "rms_norm_1p", h, type_=act(hidden), weight=b.w(f"{prefix}.norm.weight", hidden), eps=eps)
    tied = bool(cfg.tie_word_embeddings or (model_type == "qwen3_5" and full.tie_word_embeddings))
    head = embed if tied else b.w("lm_head.weight", vocab, hidden)
    b.op("%logits", "linear", hn, type_=logits(vocab), weight=head)
    attrs = model_attrs(cfg, source=source, family="gated_deltanet", model_type=model_type,
                        dtype=b.weights[embed].dtype)
    return b.model(name, "%logits", vocab, attrs)
