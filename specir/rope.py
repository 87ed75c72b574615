"""Rotary-embedding frequencies from an IR `rope` attribute (the kinds transformers implements
for the Llama family: default, linear, dynamic, yarn, longrope, llama3).

Contract: `rope_frequencies(rope, head_dim, seq_len)` returns (inv_freq [rotary_dim // 2] fp32,
attention_factor) exactly as transformers computes them for a forward whose largest position
is seq_len - 1. Only `dynamic` and `longrope` depend on seq_len.
"""
from __future__ import annotations

import math

import torch

from .errors import SpecirError
from .rope_params import KINDS


def _base_inv_freq(theta: float, dim: int) -> torch.Tensor:
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rotary_dim(rope, head_dim: int) -> int:
    return int(head_dim * float(rope.get("partial_rotary_factor", 1.0)))


def rope_frequencies(rope, head_dim: int, seq_len: int = 0) -> tuple[torch.Tensor, float]:
    kind, theta = rope.get("type", "default"), float(rope["theta"])
    dim = rotary_dim(rope, head_dim)
    if kind == "default":
        return _base_inv_freq(theta, dim), 1.0
    if kind == "linear":
        return _base_inv_freq(theta, dim) / float(rope["factor"]), 1.0
    if kind == "dynamic":
        max_pos = int(rope["max_position_embeddings"])
        if seq_len <= max_pos:
            return _base_inv_freq(theta, dim), 1.0
        factor = float(rope["factor"])
        base = theta * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
        return _base_inv_freq(base, dim), 1.0
    if kind == "llama3":
        return _llama3(rope, theta, dim), 1.0
    if kind == "yarn":
        return _yarn(rope, theta, dim)
    if kind == "longrope":
        return _longrope(rope, theta, dim, seq_len)
    raise SpecirError(f"unknown rope type {kind!r}", hint="rope types: " + ", ".join(KINDS))


def _llama3(rope, theta: float, dim: int) -> torch.Tensor:
    inv_freq = _base_inv_freq(theta, dim)
    factor, low, high = float(rope["factor"]), float(rope["low_freq_factor"]), float(rope["high_freq_factor"])
    old = float(rope["original_max_position_embeddings"])
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def _mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(rope, theta: float, dim: int) -> tuple[torch.Tensor, float]:
    original = int(rope["original_max_position_embeddings"])
    factor = rope.get("factor")
    factor = float(factor) if factor is not None else rope["max_position_embeddings"] / original
    attention_factor = rope.get("attention_factor")
    mscale, mscale_all = rope.get("mscale"), rope.get("mscale_all_dim")
    if attention_factor is None:
        attention_factor = (_mscale(factor, mscale) / _mscale(factor, mscale_all)) if mscale and mscale_all \
            else _mscale(factor)
    beta_fast, beta_slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = theta ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp
    return interpolation * (1 - keep) + extrapolation * keep, float(attention_factor)


def _longrope(rope, theta: float, dim: int, seq_len: int) -> tuple[torch.Tensor, float]:
    original = int(rope["original_max_position_embeddings"])
    factor = rope.get("factor")
    factor = float(factor) if factor is not None else rope["max_position_embeddings"] / original
    attention_factor = rope.get("attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = rope["long_factor"] if seq_len > original else rope["short_factor"]
    ext = torch.tensor(list(ext), dtype=torch.float32)
    shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (ext * theta ** shape), float(attention_factor)


def depends_on_length(rope) -> bool:
    return rope.get("type") in ("dynamic", "longrope")
