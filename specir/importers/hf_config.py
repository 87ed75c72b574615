"""config.json read through transformers' own config class of its model_type, so the hybrid
importers see exactly the values the modeling code reads: defaults, legacy keys remapped
(e.g. Nemotron-H's hybrid_override_pattern, GraniteMoeHybrid's "mamba"/"attention" layer types),
derived fields ("auto" head sizes) and the class's validation. Also the mapping of config
activation names to the IR's `activation` op."""
from __future__ import annotations

from ..errors import SourceLocation, SpecirError

# transformers ACT2FN name -> IR activation fn (ops_hybrid.ACTIVATIONS)
ACTIVATION_NAMES = {"silu": "silu", "swish": "silu", "sigmoid": "sigmoid", "relu": "relu", "relu2": "relu2",
                    "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "tanh": "tanh"}


def hf_config(config: dict, *, where: SourceLocation | None, path: str | None):
    """The transformers config object of a config.json dictionary."""
    from transformers import CONFIG_MAPPING
    model_type = config.get("model_type")
    try:
        cls = CONFIG_MAPPING[model_type]
    except KeyError:
        raise SpecirError(f"transformers has no config class for model_type {model_type!r}", location=where,
                          path=path, hint="upgrade transformers, or check config.json's model_type") from None
    try:
        from huggingface_hub.errors import StrictDataclassError as Invalid  # field and class validation
    except ImportError:  # pragma: no cover - older huggingface_hub
        Invalid = ValueError
    decode = getattr(cls, "_decode_special_floats", lambda d: d)  # {"__float__": "Infinity"} -> inf
    try:
        return cls.from_dict(decode(dict(config)))
    except (ValueError, TypeError, KeyError, AttributeError, Invalid) as exc:
        raise SpecirError(f"config.json is not a valid {model_type} config: {exc}", location=where, path=path,
                          hint="transformers' own config class rejects it; fix the listed field") from None


def ir_activation(name, key: str, builder) -> str:
    """The IR activation for config value `name` of `key`, or a SpecirError naming the key."""
    fn = ACTIVATION_NAMES.get(str(name).lower() if name is not None else None)
    if fn is None:
        raise builder.refuse(f"activation {name!r} is not supported", key,
                             "supported: " + ", ".join(sorted(ACTIVATION_NAMES)))
    return fn
