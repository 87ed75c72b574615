"""The roofline of a decode step on this machine: what `specir bench` holds the AR step against.

Contract: `step_roofline(model, target, bandwidth, flops)` returns `seconds(batch, context)`: one
forward of `model` over `batch` one-token rows (one per request, each at `context` cached tokens),
priced by cost_model.forward_cost (the weights a forward reads, the KV cache, the recurrent state,
the matmul FLOPs) at this machine's measured rates, `bandwidth` bytes/s and `flops` FLOP/s
(calibration.py): the slower of streaming the bytes and doing the FLOPs. None where the cost model
cannot price the model (a plugin op).
"""
from __future__ import annotations

from ..cost_model import forward_cost


def step_roofline(model, target, bandwidth: float, flops: float):
    def seconds(batch: int, context: float) -> float | None:
        try:
            cost = forward_cost(model, target, tokens=batch, context=max(0, round(context)), requests=batch)
        except Exception:  # noqa: BLE001 - advisory: a model the cost model cannot price gets no roofline
            return None
        return max((cost.weight_bytes + cost.kv_bytes + cost.state_bytes) / bandwidth, cost.flops / flops)
    return seconds
