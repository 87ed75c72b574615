"""Torch reference kernels of the hybrid families' stateless ops (specir/ir/ops_hybrid.py),
`fn(params, state, *inputs)` over activations [B, T, width], numerics as transformers computes
the same step (stated per kernel)."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm_1p(params, state, x):
    """Qwen3NextRMSNorm / Qwen3_5RMSNorm: fp32 norm times (1 + w) in fp32, cast once."""
    shape = x.shape
    group = params.get("group") or shape[-1]
    h = x.reshape(*shape[:-1], shape[-1] // group, group).float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + params["eps"])
    return (h * (1.0 + params["weight"].float())).to(x.dtype).reshape(shape)


def rms_norm_gated(params, state, x, gate):
    """gate_first (Mamba2's RMSNormGated): w * rmsnorm(x * silu(gate)) with the product in fp32
    and the weight applied in the model dtype; otherwise (Gated DeltaNet's):
    (w * rmsnorm(x)) * silu(gate), the last product in fp32, cast once."""
    shape, width = x.shape, x.shape[-1]
    group = params.get("group") or width
    h = x.float()
    silu = F.silu(gate.float())
    if params.get("gate_first"):
        h = h * silu
    g = h.reshape(*shape[:-1], width // group, group)
    h = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + params["eps"])).reshape(shape)
    weight = params["weight"]
    if weight.shape[0] != width:
        weight = weight.repeat(width // weight.shape[0])
    out = weight * h.to(x.dtype)
    if not params.get("gate_first"):
        out = (out.float() * silu).to(x.dtype)
    return out


def slice_(params, state, x):
    width = x.shape[-1]
    group = params.get("group") or width
    start, size = params["start"], params["size"]
    return x.reshape(*x.shape[:-1], width // group, group)[..., start:start + size].reshape(*x.shape[:-1], -1)


def concat(params, state, *xs):
    return torch.cat(xs, dim=-1)


def scale(params, state, x):
    """x * factor, / divisor (as torch applies Python scalars), then * the per-segment vector in x's dtype."""
    factor = params.get("factor", 1.0)
    if factor != 1.0:
        x = x * factor
    divisor = params.get("divisor", 1.0)
    if divisor != 1.0:
        x = x / divisor
    segments = params.get("segments") or ()
    if segments:
        vector = params.get("_vector")
        if vector is None or vector.dtype != x.dtype or vector.device != x.device:
            vector = torch.repeat_interleave(torch.tensor([float(f) for f in params["factors"]]),
                                             torch.tensor([int(s) for s in segments])).to(x.device, x.dtype)
            params["_vector"] = vector
        x = x * vector
    return x


def _relu2(x):
    return torch.square(F.relu(x))


ACTIVATIONS = {"silu": F.silu, "sigmoid": torch.sigmoid, "relu": F.relu, "relu2": _relu2, "gelu": F.gelu,
               "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "tanh": torch.tanh}


def activation(params, state, x):
    return ACTIVATIONS[params["fn"]](x)


def mul(params, state, a, b):
    return a * b


KERNELS = {"rms_norm_1p": rms_norm_1p, "rms_norm_gated": rms_norm_gated, "slice": slice_, "concat": concat,
           "scale": scale, "activation": activation, "mul": mul}
