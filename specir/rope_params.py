"""Checking an IR `rope` attribute before anything computes with it (torch-free: the verifier runs it).

`rope_problem(rope, head_dim)` names what makes the parameters unusable for heads of `head_dim`, so
that `specir.rope.rope_frequencies` never divides by zero, takes the log of a non-positive number
or misses a key at run time.
"""
from __future__ import annotations

import math

KINDS = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")


def _number(rope, key, default=None):
    value = rope.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def rope_problem(rope, head_dim: int) -> str | None:
    """What makes `rope` unusable for heads of `head_dim` (a key its type needs is missing, zero or
    negative, a divisor is zero, ...), or None. The verifier calls it, so `rope_frequencies` never
    divides by zero or misses a key at run time."""
    kind = rope.get("type", "default")
    if kind not in KINDS:
        return f"unknown rope type {kind!r} (rope types: {', '.join(KINDS)})"
    theta = _number(rope, "theta")
    if theta is None or theta <= 0 or (theta == 1 and kind == "yarn"):
        return "theta must be a finite number > 0" + (" other than 1" if kind == "yarn" else "")
    prf = _number(rope, "partial_rotary_factor", 1.0)
    if prf is None or not 0 < prf <= 1:
        return "partial_rotary_factor must be in (0, 1]"
    dim = int(head_dim * prf)
    if dim < 2 or dim % 2:
        return f"the rotary dimension head_dim * partial_rotary_factor = {dim} must be even and at least 2"

    def positive(*keys):
        for key in keys:
            value = _number(rope, key)
            if value is None or value <= 0:
                return f"rope type {kind!r} needs {key} > 0 (a finite number), got {rope.get(key)!r}"
        return None

    def optional_positive(*keys):
        return next((f"{key} must be a finite number > 0, got {rope.get(key)!r}" for key in keys
                     if rope.get(key) is not None and (_number(rope, key) is None or _number(rope, key) <= 0)), None)
    if kind == "linear":
        return positive("factor")
    if kind == "dynamic":
        return positive("factor", "max_position_embeddings") or (
            "rope type 'dynamic' needs a rotary dimension above 2" if dim <= 2 else None)
    if kind == "llama3":
        problem = positive("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        if problem is None and _number(rope, "low_freq_factor") == _number(rope, "high_freq_factor"):
            problem = "rope type 'llama3' needs low_freq_factor != high_freq_factor"
        return problem
    if kind in ("yarn", "longrope"):
        problem = positive("original_max_position_embeddings") or (
            positive("factor") if rope.get("factor") is not None else positive("max_position_embeddings"))
        problem = problem or optional_positive("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim")
        if problem is None and kind == "longrope":
            for key in ("long_factor", "short_factor"):
                factors = rope.get(key)
                if not (isinstance(factors, tuple | list) and len(factors) == dim // 2 and all(
                        isinstance(f, (int, float)) and not isinstance(f, bool) and math.isfinite(f) and f > 0
                        for f in factors)):
                    return f"rope type 'longrope' needs {key}: {dim // 2} positive numbers"
        return problem
    return None
