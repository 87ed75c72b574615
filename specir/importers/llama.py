"""Llama-family importer: config.json -> model-graph IR.

Covers Llama 2/3, Qwen2/2.5 (q/k/v bias), Qwen3 (per-head q/k RMSNorm, explicit head_dim),
Mistral (sliding window): GQA, tied embeddings, and the rope-scaling kinds transformers
implements for them (default, linear, dynamic, yarn, longrope, llama3). Weight references are
checked against the safetensors headers (name, shape) without loading any tensor.
"""
from __future__ import annotations

import math

from ..errors import SourceLocation, SpecirError
from ..ir.nodes import Attrs, Graph, Model, Op, Weight
from ..ir.opdefs import without_defaults
from ..ir.types import IDS, POSITIONS, TensorType, act, logits, mask
from .checkpoint import TensorInfo

MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral")
ROPE_NEEDS_MAX_POSITION = ("dynamic", "yarn", "longrope")


_POSITIVE_INTS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size",
                  "num_key_value_heads", "head_dim", "max_position_embeddings")
_POSITIVE_FLOATS = ("rms_norm_eps", "rope_theta")
_BOOLS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window")
_MAX_DIM = 2**31 - 1  # any one dimension of a tensor (the kernels index in 32 bits)


def check_config(config: dict, where, path) -> None:
    """The config.json values the importer reads have the right JSON types and ranges; else a
    SpecirError naming the key (at the .spec's import line when there is one)."""
    def fail(key, want, value):
        shown = f"{value!r} (a string)" if isinstance(value, str) else repr(value)
        raise SpecirError(f"config.json: {key!r} must be {want}, got {shown}", location=where, path=path,
                          hint=f"fix {key} in {path or 'config.json'} (save_pretrained writes numbers, not strings)")
    for key in _POSITIVE_INTS:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_DIM:
            fail(key, f"an integer from 1 to {_MAX_DIM}", value)
    for key in _POSITIVE_FLOATS:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            fail(key, "a finite number > 0", value)
    for key in _BOOLS:
        if config.get(key) is not None and not isinstance(config[key], bool):
            fail(key, "true or false", config[key])
    for key in ("rope_parameters", "rope_scaling"):
        value = config.get(key)
        if value is not None and not isinstance(value, dict):
            fail(key, "an object (or null)", value)
        for sub, v in (value or {}).items():
            if sub in ("rope_type", "type"):
                if not isinstance(v, str):
                    fail(f"{key}.{sub}", "a string", v)
            elif v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                    or (sub == "rope_theta" and v <= 0)):
                if isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                    continue  # longrope's per-dimension factors
                fail(f"{key}.{sub}", "a finite number" + (" > 0" if sub == "rope_theta" else ""), v)
    eos = config.get("eos_token_id")
    if eos is not None and not all(isinstance(e, int) and not isinstance(e, bool) and 0 <= e <= _MAX_DIM
                                   for e in (eos if isinstance(eos, list) else [eos])):
        fail("eos_token_id", "a token id or a list of token ids", eos)
    start = config.get("max_window_layers")
    if start is not None and (isinstance(start, bool) or not isinstance(start, int) or start < 0):
        fail("max_window_layers", "an integer >= 0", start)
    window = config.get("sliding_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 0):
        fail("sliding_window", "an integer >= 0 (or null)", window)
    heads, kv = config.get("num_attention_heads"), config.get("num_key_value_heads")
    if heads and kv and heads % kv:
        raise SpecirError(f"config.json: num_attention_heads ({heads}) is not a multiple of num_key_value_heads "
                          f"({kv})", location=where, path=path, hint="grouped-query attention shares each kv head "
                                                                    "among the same number of query heads")
    hidden = config.get("hidden_size")
    if heads and hidden and not config.get("head_dim") and hidden % heads:
        raise SpecirError(f"config.json: hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads})",
                          location=where, path=path, hint="give head_dim explicitly, or fix the sizes")
    types = config.get("layer_types")
    layers = config.get("num_hidden_layers")
    if types is not None and (not isinstance(types, list) or (layers and len(types) != layers)):
        fail("layer_types", f"a list of {layers} layer kinds", types)


def _get(config: dict, key: str, where, path, default=None, required=True):
    value = config.get(key, default)
    if value is None and required:
        raise SpecirError(f"config.json has no {key!r}", location=where, path=path,
                          hint=f"a {config.get('model_type', 'llama')} config needs {key}")
    return value


def rope_attrs(config: dict) -> dict:
    """The rope dictionary for the IR from either the v5 `rope_parameters` or v4 fields."""
    params = dict(config.get("rope_parameters") or {})
    if not params:
        params = dict(config.get("rope_scaling") or {})
        params["rope_theta"] = config.get("rope_theta") or 10000.0
    if params.get("rope_theta") is None:
        params["rope_theta"] = config.get("rope_theta") or 10000.0
    if config.get("partial_rotary_factor") is not None and "partial_rotary_factor" not in params:
        params["partial_rotary_factor"] = config["partial_rotary_factor"]
    kind = params.pop("rope_type", None) or params.pop("type", None) or "default"
    params.pop("type", None)
    out = {"type": kind, "theta": float(params.pop("rope_theta"))}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = float(value) if isinstance(value, int) and not isinstance(value, bool) and \
            key.endswith(("factor", "mscale", "mscale_all_dim", "beta_fast", "beta_slow")) else value
    if kind in ROPE_NEEDS_MAX_POSITION:
        out["max_position_embeddings"] = max_position(config)
    return out


def max_position(config: dict) -> int:
    """config.json's max_position_embeddings; when absent, what transformers' config class of the
    model type defaults to (2048 for llama, 32768 for qwen2/qwen3, 131072 for mistral)."""
    if config.get("max_position_embeddings") is not None:
        return int(config["max_position_embeddings"])
    try:
        from transformers import CONFIG_MAPPING
        return int(CONFIG_MAPPING[config.get("model_type", "llama")]().max_position_embeddings)
    except (KeyError, AttributeError, TypeError, ValueError):
        return 2048


def _windows(config: dict, layers: int) -> list[int]:
    model_type = config.get("model_type")
    start = config.get("max_window_layers")
    if start is not None and (isinstance(start, bool) or not isinstance(start, int) or start < 0):
        fail("max_window_layers", "an integer >= 0", start)
    window = config.get("sliding_window")
    if model_type == "mistral":
        return [int(window) if window else 0] * layers
    if model_type in ("qwen2", "qwen3"):
        if not config.get("use_sliding_window") or not window:
            return [0] * layers
        types = config.get("layer_types")
        if types:
            return [int(window) if t == "sliding_attention" else 0 for t in types]
        start = config.get("max_window_layers", layers)
        return [int(window) if i >= start else 0 for i in range(layers)]
    return [0] * layers


def build_llama(config: dict, tensors: dict[str, TensorInfo], *, name: str, source: str,
                where: SourceLocation | None = None, config_path: str | None = None) -> Model:
    """The model graph of a Llama-family checkpoint, weights checked against `tensors`."""
    check_config(config, where, config_path)
    g = lambda k, d=None, r=True: _get(config, k, where, config_path, d, r)  # noqa: E731
    hidden, layers, heads = g("hidden_size"), g("num_hidden_layers"), g("num_attention_heads")
    vocab, inter = g("vocab_size"), g("intermediate_size")
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    eps = float(config.get("rms_norm_eps") or 1e-6)  # null means the default, as in transformers
    tied = bool(config.get("tie_word_embeddings", False))
    qk_norm = config.get("model_type") == "qwen3"
    rope = rope_attrs(config)
    windows = _windows(config, layers)

    weights: dict[str, TensorType] = {}

    def w(tensor: str, *shape: int, optional: bool = False) -> str | None:
        info = tensors.get(tensor)
        if info is None:
            if optional:
                return None
            raise SpecirError(f"the checkpoint has no tensor {tensor!r}", location=where, path=source,
                              hint="config.json and the safetensors files disagree: the checkpoint is "
                                   "incomplete or of another architecture")
        if info.shape != shape:
            raise SpecirError(f"tensor {tensor!r} has shape {list(info.shape)} in {info.file.name}, "
                              f"but config.json implies {list(shape)}", location=where, path=str(info.file),
                              hint="config.json does not describe these weights")
        weights[tensor] = TensorType(info.dtype, shape)
        return tensor

    bias_attn = bool(config.get("attention_bias", False)) or config.get("model_type") == "qwen2"
    bias_mlp = bool(config.get("mlp_bias", False))
    ops: list[Op] = []

    def op(result, opname, *operands, type_, **attrs):
        ops.append(Op(opname, tuple(operands), Attrs(without_defaults(opname, attrs)), result, type_))
        return result

    def linear(result, x, weight, out, inp, bias: bool, type_=None):
        wname = w(weight + ".weight", out, inp)
        bname = w(weight + ".bias", out, optional=not bias) if bias else None
        return op(result, "linear", x, type_=type_ or act(out), weight=wname, bias=bname)

    embed_name = w("model.embed_tokens.weight", vocab, hidden)
    h = op("%h", "embed", "%ids", type_=act(hidden), weight=embed_name)
    qw, kw = heads * head_dim, kv_heads * head_dim
    for i in range(layers):
        p, L = f"model.layers.{i}", f"%l{i}"
        x = op(f"{L}.in", "rms_norm", h, type_=act(hidden), weight=w(f"{p}.input_layernorm.weight", hidden), eps=eps)
        q = linear(f"{L}.q", x, f"{p}.self_attn.q_proj", qw, hidden, bias_attn)
        k = linear(f"{L}.k", x, f"{p}.self_attn.k_proj", kw, hidden, bias_attn)
        v = linear(f"{L}.v", x, f"{p}.self_attn.v_proj", kw, hidden, bias_attn)
        if qk_norm:
            q = op(f"{L}.qn", "rms_norm", q, type_=act(qw), weight=w(f"{p}.self_attn.q_norm.weight", head_dim),
                   eps=eps, group=head_dim)
            k = op(f"{L}.kn", "rms_norm", k, type_=act(kw), weight=w(f"{p}.self_attn.k_norm.weight", head_dim),
                   eps=eps, group=head_dim)
        q = op(f"{L}.qr", "rope", q, "%pos", type_=act(qw), head_dim=head_dim, rope=rope)
        k = op(f"{L}.kr", "rope", k, "%pos", type_=act(kw), head_dim=head_dim, rope=rope)
        a = op(f"{L}.attn", "attention", q, k, v, "%mask", type_=act(qw), layer=i, heads=heads,
               kv_heads=kv_heads, head_dim=head_dim, window=windows[i])
        o = linear(f"{L}.o", a, f"{p}.self_attn.o_proj", hidden, qw, bool(config.get("attention_bias", False)))
        r = op(f"{L}.res", "add", h, o, type_=act(hidden))
        y = op(f"{L}.post", "rms_norm", r, type_=act(hidden),
               weight=w(f"{p}.post_attention_layernorm.weight", hidden), eps=eps)
        gate = linear(f"{L}.gate", y, f"{p}.mlp.gate_proj", inter, hidden, bias_mlp)
        up = linear(f"{L}.up", y, f"{p}.mlp.up_proj", inter, hidden, bias_mlp)
        s = op(f"{L}.act", "swiglu", gate, up, type_=act(inter))
        d = linear(f"{L}.down", s, f"{p}.mlp.down_proj", hidden, inter, bias_mlp)
        h = op(f"{L}.out", "add", r, d, type_=act(hidden))
    hn = op("%norm", "rms_norm", h, type_=act(hidden), weight=w("model.norm.weight", hidden), eps=eps)
    if tied:
        head = embed_name
    else:
        head = w("lm_head.weight", vocab, hidden)
    op("%logits", "linear", hn, type_=logits(vocab), weight=head)

    graph = Graph((("%ids", IDS), ("%pos", POSITIONS), ("%mask", mask("causal"))), tuple(ops), "%logits",
                  logits(vocab))
    dtype = weights[embed_name].dtype
    eos = config.get("eos_token_id")
    attrs = {"source": source, "family": "llama", "model_type": config.get("model_type", "llama"),
             "dtype": dtype, "max_position": max_position(config)}
    if eos is not None:
        attrs["eos"] = tuple(eos) if isinstance(eos, list) else (int(eos),)
    return Model(name, Attrs(attrs), tuple(Weight(n, t) for n, t in weights.items()), graph, loc=where)


