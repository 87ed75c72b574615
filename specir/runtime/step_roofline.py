"""The byte roofline of a decode step on this machine: what `specir bench` holds the AR step against.

Contract: `byte_roofline(model, target, bandwidth)` returns `seconds(batch, context)`: the bytes one
forward of `model` over `batch` one-token rows must read (cost_model.forward_cost: every weight
except the embedding table, the KV cache of `batch` requests at `context` cached tokens, the
recurrent state) divided by `bandwidth` (bytes/s: this machine's measured copy bandwidth,
calibration.py), or None where the cost model cannot price the model (a plugin op). FLOPs are left
out: a decode step at the batch sizes `bench` runs is bound by its bytes.
"""
from __future__ import annotations

from ..cost_model import forward_cost


def byte_roofline(model, target, bandwidth: float):
    def seconds(batch: int, context: float) -> float | None:
        try:
            cost = forward_cost(model, target, tokens=batch, context=max(0, round(context)), requests=batch)
        except Exception:  # noqa: BLE001 - advisory: a model the cost model cannot price gets no roofline
            return None
        return (cost.weight_bytes + cost.kv_bytes + cost.state_bytes) / bandwidth
    return seconds
