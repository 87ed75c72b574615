"""Torch kernels for the model-graph ops: the reference numerics every other backend is tested
against. Each kernel is `fn(params, state, *inputs) -> tensor` over activations [B, T, width].

Numerics follow transformers' Llama: RMSNorm in fp32 then cast, weight multiplied in the model
dtype; rotary cos/sin computed in fp32, cast to the model dtype, applied in the model dtype;
attention scores, softmax and P@V in fp32, output cast once.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def embed(params, state, ids):
    return F.embedding(ids, params["weight"])


def rms_norm(params, state, x):
    group = params.get("group") or 0
    shape = x.shape
    if group:
        x = x.reshape(*shape[:-1], shape[-1] // group, group)
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + params["eps"])
    out = params["weight"] * h.to(x.dtype)
    return out.reshape(shape)


def linear(params, state, x):
    return F.linear(x, params["weight"], params.get("bias"))


def packed_linear(params, state, x):
    """`specir.bf12.linear_reference(x, W, bias)` for a BF12Matrix W, i.e. the bits of `linear`
    over the unpacked weight: F.linear(x, unpack(W).to(x.dtype), bias). The matrix is decoded on
    the first call and kept in `params` (which live as long as the ModelRunner), since a CPU
    decode costs more than the GEMV it feeds."""
    decoded = params.get("decoded")
    if decoded is None or decoded.dtype != x.dtype or decoded.device != x.device:
        from specir.bf12 import unpack
        packed = params["weight"]
        decoded = unpack(packed if packed.device == x.device else packed.to(x.device)).to(x.dtype)
        params["decoded"] = decoded
    return F.linear(x, decoded, params.get("bias"))


def rope_cos_sin(params, state, dtype):
    """cos/sin [B, T, rotary_dim] for this forward, shared by every rope op with the same table."""
    key = ("rope", id(params["table"]))
    cached = state.scratch.get(key)
    if cached is None:
        inv_freq = params["table"].frequencies(state.max_position + 1)
        freqs = state.positions.float()[..., None] * inv_freq.to(state.positions.device)[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        factor = params["table"].attention_factor
        cached = ((emb.cos() * factor).to(dtype), (emb.sin() * factor).to(dtype))
        state.scratch[key] = cached
    return cached


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(params, state, x, positions):
    hd, rd = params["head_dim"], params["rotary_dim"]
    B, T, W = x.shape
    x = x.view(B, T, W // hd, hd)
    cos, sin = rope_cos_sin(params, state, x.dtype)
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    rot, rest = x[..., :rd], x[..., rd:]
    rot = (rot * cos) + (_rotate_half(rot) * sin)
    return torch.cat((rot, rest), dim=-1).reshape(B, T, W) if rd < hd else rot.reshape(B, T, W)


def swiglu(params, state, gate, up):
    return F.silu(gate) * up


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
    keys = cache_k[slots, :, :S].float()  # [B, KVH, S, D]
    vals = cache_v[slots, :, :S].float()
    qf = q.view(B, T, H, D).transpose(1, 2).float()  # [B, H, T, D]
    group = H // KVH
    keys = keys.repeat_interleave(group, dim=1)
    vals = vals.repeat_interleave(group, dim=1)
    scale = params["scale"] or 1.0 / math.sqrt(D)
    scores = torch.matmul(qf, keys.transpose(-1, -2)) * scale  # [B, H, T, S]
    visible = state.visible
    if params.get("window"):
        visible = visible & state.window_ok(params["window"])
    scores = scores.masked_fill(~visible[:, None, :, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, vals)  # [B, H, T, D]
    return out.transpose(1, 2).reshape(B, T, H * D).to(q.dtype)


KERNELS = {"embed": embed, "rms_norm": rms_norm, "linear": linear, "packed_linear": packed_linear, "rope": rope,
           "swiglu": swiglu, "add": add, "attention": attention}

# The hybrid families' ops: stateless ones and the recurrent ones, in their own files.
from .hybrid import KERNELS as _HYBRID_KERNELS  # noqa: E402
from .recurrent import KERNELS as _RECURRENT_KERNELS  # noqa: E402

KERNELS.update(_HYBRID_KERNELS)
KERNELS.update(_RECURRENT_KERNELS)
