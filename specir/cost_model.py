"""A roofline cost model: per model forward, the bytes it must read and the FLOPs it must do.

Contract: `forward_cost(model, target, tokens, context, requests)` counts every weight except the
embedding table (one row per token is read), plus the KV cache each of `requests` requests
attends over (its `context` rows and its share of the `tokens`), plus the recurrent state (ops'
`states` interface, per request: its committed state read once, and one node state written per token), plus
the bytes of ranking `ranked_rows` rows of its logits over the vocabulary afterwards (a draft
op's ModelForward.ranked: the target's `rank_reads` passes over them, else torch's ranking,
specir/step/ranking.BYTES_PER_LOGIT by the logits' dtype), and
returns the target's roofline time of those bytes and FLOPs (`Target.roofline`: their max, plus the
fraction `step_serial` of the smaller: 0 unless the target's fitted step rates say otherwise) plus
the target's fixed cost per graph op (`step_op_seconds`, 0 on a GPU) times the model's ops; the matmul
FLOPs count the rows rounded up to the target's GEMM row tile (`Target.gemm_rows`).
`estimate(pipeline, target)` prices the forwards every step op declares (its `forwards`
interface: model, tokens, count) plus each op's declared fixed overhead; it reads no op names. Calibration by microbenchmarks refines the
target's numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir.nodes import Model, Pipeline
from .ir.ops_recurrent import state_specs
from .targets import Target

BYTES_PER_ELEMENT = {"bf16": 2.0, "f16": 2.0, "f32": 4.0, "bf12": 12.25 / 8, "i32": 4.0}  # bf12: docs/BF12.md, metadata counted


@dataclass(frozen=True)
class ForwardCost:
    weight_bytes: float
    kv_bytes: float
    flops: float
    seconds: float
    state_bytes: float = 0.0
    rank_bytes: float = 0.0

    def as_dict(self) -> dict:
        return {"weight_bytes": self.weight_bytes, "kv_bytes": self.kv_bytes, "state_bytes": self.state_bytes,
                "rank_bytes": self.rank_bytes, "flops": self.flops, "seconds": self.seconds}


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def forward_cost(model: Model, target: Target, tokens: int = 1, context: int = 512, requests: int = 1,
                 ranked_rows: int = 0) -> ForwardCost:
    embed = {op.attrs["weight"] for op in model.graph.ops if op.name == "embed"}
    lm_head_reads_embed = any(op.name in ("linear", "packed_linear") and op.attrs.get("weight") in embed
                              for op in model.graph.ops)
    weight_bytes = flops = 0.0
    gemm_rows = target.gemm_rows(tokens)
    for w in model.weights:
        size = BYTES_PER_ELEMENT.get(w.type.dtype, 2.0)
        n = _numel(w.type.shape)
        if w.name in embed and not lm_head_reads_embed:
            weight_bytes += tokens * w.type.shape[-1] * size
            continue
        weight_bytes += n * size
        if len(w.type.shape) == 2:
            flops += 2.0 * n * gemm_rows
    kv_bytes = 0.0
    act_size = BYTES_PER_ELEMENT.get(str(model.attrs.get("dtype", "bf16")), 2.0)
    for op in model.graph.ops:
        if op.name == "attention":
            kv_width = op.attrs["kv_heads"] * op.attrs["head_dim"]
            per_request = tokens / requests
            rows = context + per_request
            if op.attrs.get("window"):  # a sliding window reads at most its rows (two-level-verify{kind=window})
                rows = min(rows, op.attrs["window"] + per_request)
            kv_bytes += 2 * kv_width * rows * act_size * requests
            flops += 4.0 * op.attrs["heads"] * op.attrs["head_dim"] * rows * tokens
    state_bytes = 0.0
    for op in model.graph.ops:
        for spec in state_specs(op):
            size = 4.0 if spec.dtype == "f32" else act_size
            state_bytes += (requests + tokens) * _numel(spec.shape) * size  # each request's state read once
    rank_bytes = ranked_rows * _vocab(model) * _rank_bytes_per_logit(act_size, target)
    seconds = (target.roofline(weight_bytes + kv_bytes + state_bytes + rank_bytes, flops)
               + len(model.graph.ops) * target.step_op_seconds)
    return ForwardCost(weight_bytes, kv_bytes, flops, seconds, state_bytes, rank_bytes)


def _vocab(model: Model) -> int:
    width = getattr(model.graph.result_type, "width", None)
    return int(width or 0)


def _rank_bytes_per_logit(act_size: float, target: Target) -> float:
    if target.rank_reads is not None:
        return target.rank_reads * act_size
    from .step.ranking import BYTES_PER_LOGIT
    return BYTES_PER_LOGIT["f32" if act_size >= 4 else "bf16"]


def estimate(pipeline: Pipeline, target: Target, context: int = 512) -> dict:
    """Roofline seconds per decode step, split into the forwards the step's ops declare; `context`
    cached tokens, at most half of the smallest model context in the pipeline (a step needs room)."""
    from .step.interfaces import StepInfo
    limits = [int(m.attrs["max_position"]) for m in pipeline.models if m.attrs.get("max_position")]
    if limits:
        context = max(1, min(context, min(limits) // 2))
    parts = []
    if pipeline.step is not None:
        info = StepInfo(pipeline)
        for op in pipeline.step.ops:
            iface = info.interfaces(op)
            for f in iface.forwards(op, info):
                model = pipeline.model(f.model)
                if model is None or model.graph is None:
                    continue
                cost = forward_cost(model, target, f.tokens, context, ranked_rows=f.ranked)
                parts.append({"op": op.name, "model": "@" + model.name, "purpose": f.purpose, "calls": f.count,
                              "tokens": f.tokens, "seconds": f.count * cost.seconds,
                              **{k: v for k, v in cost.as_dict().items() if k != "seconds"}})
            if iface.overhead_s:
                parts.append({"op": op.name, "purpose": "overhead", "calls": 1, "tokens": 0,
                              "seconds": iface.overhead_s})
    total = sum(p["seconds"] for p in parts)
    return {"target": target.name, "context": context, "step_seconds": total, "parts": parts}
