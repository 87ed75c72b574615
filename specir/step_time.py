"""The step-time side of the cost model: seconds per decode step of a pipeline, split by role.

Contract: `step_time(pipeline, target, calibration, context)` -> `StepTime` with `draft`,
`verify` and `overhead` seconds (and `total`). Each model forward costs its roofline
(cost_model.forward_cost's bytes and FLOPs at the calibrated bandwidth and matmul rate) plus one
small-op cost per op of its graph (the launch/dispatch floor); an op's fixed host cost is its
`overhead_s` interface (n-gram lookup), and the accept/commit bookkeeping costs
STEP_OVERHEAD_OPS small ops per step. `overhead_scale` (fitted to a
measured AR step by `fit_overhead`) multiplies the per-op costs. This is the one function the
search calls for step time; when op definitions carry cost interfaces it reads them here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .calibration import Calibration
from .cost_model import estimate
from .ir.nodes import Pipeline
from .ir.opdefs import role_of
from .targets import Target

STEP_OVERHEAD_OPS = 8  # accept + commit + the step loop, in small-op units


@dataclass
class StepTime:
    draft: float
    verify: float
    overhead: float
    parts: list = field(default_factory=list)

    @property
    def total(self) -> float:
        return self.draft + self.verify + self.overhead

    def as_dict(self) -> dict:
        return {"draft": self.draft, "verify": self.verify, "overhead": self.overhead, "total": self.total,
                "parts": self.parts}


def step_time(pipeline: Pipeline, target: Target, calibration: Calibration, context: int = 512,
              overhead_scale: float = 1.0) -> StepTime:
    est = estimate(pipeline, target, context)
    op_s = calibration.op_seconds * overhead_scale
    draft = verify = 0.0
    parts = []
    overhead = STEP_OVERHEAD_OPS * op_s
    for part in est["parts"]:
        if "model" not in part:  # an op's fixed host-side cost (its `overhead_s` interface)
            parts.append(dict(part))
            if role_of(part["op"]) == "draft":
                draft += part["seconds"]
            else:
                overhead += part["seconds"]
            continue
        model = pipeline.model(part["model"])
        ops = len(model.graph.ops) if model is not None and model.graph is not None else 0
        moved = part["weight_bytes"] + part["kv_bytes"] + part.get("state_bytes", 0.0) + part.get("rank_bytes", 0.0)
        roof = max(moved / calibration.bandwidth, part["flops"] / calibration.flops)
        seconds = part["calls"] * (roof + ops * op_s)
        parts.append({**part, "seconds": seconds})
        if role_of(part["op"]) == "draft":
            draft += seconds
        else:
            verify += seconds
    return StepTime(draft, verify, overhead, parts)


def fit_overhead(ar_pipeline: Pipeline, target: Target, calibration: Calibration, measured_step: float,
                 context: int = 512) -> float:
    """The `overhead_scale` that makes the predicted AR step equal the measured one (>= 0)."""
    base = step_time(ar_pipeline, target, calibration, context, overhead_scale=0.0).total
    unit = step_time(ar_pipeline, target, calibration, context, overhead_scale=1.0).total - base
    if unit <= 0:
        return 1.0
    return max(0.0, (measured_step - base) / unit)
