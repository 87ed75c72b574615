"""The reference backend's op kernels: adapters from the model-graph ops to the reference
numerics in specir.kernel_reference. Each kernel is `fn(params, state, *inputs) -> tensor` over
activations [B, T, width]: it unpacks the op's params, the forward's state (positions, KV cache,
visibility) and the batched shapes, and leaves every formula (RMSNorm, linear, rotary, SwiGLU,
attention's scores/softmax/P@V) to kernel_reference, the code the Triton and TVM kernels are
tested against. Those numerics follow transformers' Llama (see docs/KERNEL_CONTRACTS.md).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from specir.kernel_reference import (attend_reference, linear_reference, rms_norm_reference, rope_cos_sin_reference,
                                     rope_rotate_reference, silu_mul_reference)


def embed(params, state, ids):
    return F.embedding(ids, params["weight"])


def rms_norm(params, state, x):
    return rms_norm_reference(x, params["weight"], params["eps"], params.get("group") or 0)


def linear(params, state, x):
    return linear_reference(x, params["weight"], params.get("bias"))


def packed_linear(params, state, x):
    """`specir.bf12.linear_reference(x, W, bias)` for a BF12Matrix W, i.e. the bits of `linear`
    over the unpacked weight: linear_reference(x, unpack(W).to(x.dtype), bias). The matrix is decoded on
    the first call and kept in `params` (which live as long as the ModelRunner), since a CPU
    decode costs more than the GEMV it feeds."""
    decoded = params.get("decoded")
    if decoded is None or decoded.dtype != x.dtype or decoded.device != x.device:
        from specir.bf12 import unpack
        packed = params["weight"]
        decoded = unpack(packed if packed.device == x.device else packed.to(x.device)).to(x.dtype)
        params["decoded"] = decoded
    return linear_reference(x, decoded, params.get("bias"))


def rope_cos_sin(params, state, dtype):
    """cos/sin [B, T, 1, rotary_dim/2] for this forward, shared by every rope op with the same table."""
    key = ("rope", id(params["table"]))
    cached = state.scratch.get(key)
    if cached is None:
        table, pos = params["table"], state.positions
        inv_freq = table.frequencies(state.max_position + 1).to(pos.device)
        cos, sin = rope_cos_sin_reference(pos, inv_freq, dtype, table.attention_factor)
        cached = (cos.reshape(*pos.shape, 1, -1), sin.reshape(*pos.shape, 1, -1))
        state.scratch[key] = cached
    return cached


def rope(params, state, x, positions):
    hd = params["head_dim"]
    B, T, W = x.shape
    cos, sin = rope_cos_sin(params, state, x.dtype)
    return rope_rotate_reference(x.view(B, T, W // hd, hd), cos, sin).reshape(B, T, W)


def swiglu(params, state, gate, up):
    return silu_mul_reference(gate, up)


def add(params, state, a, b):
    return a + b


def attention(params, state, q, k, v, mask):
    """Write k/v for the new tokens into the layer's cache, then attend (see KERNEL_CONTRACTS.md)."""
    H, KVH, D = params["heads"], params["kv_heads"], params["head_dim"]
    B, T, _ = q.shape
    cache_k, cache_v = state.cache.layer(params["layer"])
    slots, start = state.slots, state.write_start  # start[b] = lens[b] + offset[b]
    index = start[:, None] + torch.arange(T, device=q.device)[None, :]  # [B, T] cache rows
    sl = slots[:, None].expand(B, T)
    cache_k[sl, :, index] = k.view(B, T, KVH, D).to(cache_k.dtype)
    cache_v[sl, :, index] = v.view(B, T, KVH, D).to(cache_v.dtype)
    S = state.attend_len
    visible = state.visible
    if params.get("window"):
        visible = visible & state.window_ok(params["window"])
    out = attend_reference(q.view(B, T, H, D).transpose(1, 2), cache_k[slots, :, :S], cache_v[slots, :, :S],
                           visible, params["scale"] or 1.0 / math.sqrt(D))  # [B, H, T, D]
    return out.transpose(1, 2).reshape(B, T, H * D).to(q.dtype)


KERNELS = {"embed": embed, "rms_norm": rms_norm, "linear": linear, "packed_linear": packed_linear, "rope": rope,
           "swiglu": swiglu, "add": add, "attention": attention}

# The hybrid families' ops: stateless ones and the recurrent ones, in their own files.
from .hybrid import KERNELS as _HYBRID_KERNELS  # noqa: E402
from .vocab import KERNELS as _VOCAB_KERNELS  # noqa: E402
from .recurrent import KERNELS as _RECURRENT_KERNELS  # noqa: E402

KERNELS.update(_HYBRID_KERNELS)
KERNELS.update(_VOCAB_KERNELS)
KERNELS.update(_RECURRENT_KERNELS)
