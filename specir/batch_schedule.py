"""The batch side of the cost model: how many drafted tokens a step should verify at each batch size.

Contract: `budget_table(pipeline, target, max_batch, alpha, context)` -> [tokens for b = 1 ..
max_batch]: for b live requests, the drafted-token budget n*b (n per request, 0 <= n <= the draft's
width) maximising b * tau(n) / step(b, n), where tau(n) is the expected emission of the draft's n
most confident nodes at per-token acceptance `alpha` (the draft op's emission curve,
specir/step/emission.py: a chain's 1 + alpha + ... + alpha^n up to its depth, a tree's n most
probable nodes), and step(b, n) prices, by the
roofline of cost_model.forward_cost over b requests' rows (the shape the packed verify runs: each
request reads its own KV cache), the target forward over b(1 + n) tokens plus the draft's forwards
(they run whatever the budget; each draft op as it runs at b live requests, its `at_live`
interface: a narrowed tree's fewer children per node), the ranking of their logits included (ModelForward.ranked: a
tree's levels rank topk rows per request over the full vocabulary, which at a large batch costs
more than the drafter's weights).
`step_forwards`, `draft_seconds` and `forward_seconds` are those prices on their own.
`predicted_speedup(pipeline, target, batch, alpha)`: the same model's speedup over AR of the step
as it is at `batch` live requests (its draft at that live count: a budget's table entry, else the
whole draft per request; 1.0 where the step drafts nothing then, its draft ops off; below 1 where
it verifies nothing while a draft op that cannot stop still runs). `drafting_can_stop(pipeline)`:
every draft op declares `off_at`; where one does not (draft.cascade, a plugin's draft), the
table prices n = 0 with the draft's forwards, which run anyway. `slow_batches(...)`: the batch
sizes of 1, 8, 32, 64 where that is below 1, the compile note's subject; `never_drafts(pipeline)`:
every draft op is off from one live request on (the other note's); `verifies_whole_draft(
pipeline, batch)`: whether each request then verifies its draft's whole width (no budget cuts it).
As b grows, the verify turns compute-bound and n shrinks; n = 0 (a plain AR verify) when no
draft pays for its extra verify rows. The table reads the step ops' `forwards` interfaces only.
"""
from __future__ import annotations

from .errors import SpecirError

from .cost_model import forward_cost
from .live_table import trimmed
from .ir.nodes import Pipeline
from .step.interfaces import StepInfo
from .targets import Target


def forward_seconds(pipeline: Pipeline, model: str, rows: int, target: Target, context: int = 512,
                    requests: int = 1, ranked_rows: int = 0) -> float:
    """The roofline seconds of one forward of `model` over `rows` tokens of `requests` requests,
    `ranked_rows` of whose logits are then ranked over the vocabulary (cost_model.forward_cost)."""
    m = pipeline.model(model)
    if m is None or m.graph is None:
        raise SpecirError(f"batch-fusion's shrink table needs the graph of @{model.lstrip('@')}, which is not expanded",
                          hint="load the pipeline through specir (its imports are expanded)")
    return forward_cost(m, target, rows, context, requests, ranked_rows).seconds


def step_forwards(pipeline: Pipeline, live: int | None = None) -> tuple[str, int, list]:
    """(the verifying model, the most drafted tokens a request can verify, the draft's forwards);
    with `live`, the draft ops as they run with that many requests decoding (their `at_live`)."""
    info = StepInfo(pipeline)
    verify = _last_verify(info)
    drafts = []
    for op in pipeline.step.ops:
        if info.has_role(op, "verify"):
            continue
        iface = info.interfaces(op)
        running = iface.at_live(op, live) if live is not None and iface.at_live is not None else op
        drafts += iface.forwards(running, info)
    return verify.symbols[0][1:], info.width(verify) - 1, drafts


def emission_curve(pipeline: Pipeline, alpha: float) -> list[float]:
    """tau[n], n = 0 .. the verify's drafted width: the verified draft's emission curve."""
    info = StepInfo(pipeline)
    verify = _last_verify(info)
    return info.emission_of(verify.values[1], alpha)[:info.width(verify)]


def _last_verify(info: StepInfo):
    return [op for op in info.pipeline.step.ops if info.has_role(op, "verify")][-1]


def draft_seconds(pipeline: Pipeline, drafts: list, batch: int, target: Target, context: int = 512) -> float:
    """The draft's forwards for `batch` requests (they run whatever the budget)."""
    return sum(f.count * forward_seconds(pipeline, f.model, batch * f.tokens, target, context, batch, batch * f.ranked)
               for f in drafts)


def budget_table(pipeline: Pipeline, target: Target, max_batch: int, alpha: float, context: int = 512) -> list[int]:
    verifier, width, _ = step_forwards(pipeline)
    tau = emission_curve(pipeline, alpha)
    offable = drafting_can_stop(pipeline)
    table = []
    for b in range(1, max_batch + 1):
        draft_s = draft_seconds(pipeline, step_forwards(pipeline, b)[2], b, target, context)
        # n = 0: plain AR where the draft can stop (off_at), else the draft still runs, unverified
        best_n, best_rate = 0, b / _step_seconds(pipeline, verifier, b, 0, 0.0 if offable else draft_s, target, context)
        for n in range(1, width + 1):
            rate = b * tau[n] / _step_seconds(pipeline, verifier, b, n, draft_s, target, context)
            if rate > best_rate * (1 + 1e-9):
                best_n, best_rate = n, rate
        table.append(best_n * b)
    return trimmed(table)  # the last entry covers larger batches


def _step_seconds(pipeline, verifier: str, batch: int, n: int, draft_s: float, target: Target, context: int) -> float:
    """A step of `batch` requests verifying n drafted tokens each, with a draft of `draft_s`."""
    return forward_seconds(pipeline, verifier, batch * (1 + n), target, context, batch) + draft_s


def _drafted(pipeline: Pipeline, batch: int) -> tuple[int, int]:
    """(the most drafted tokens the step verifies over `batch` live requests, the draft's width per
    request); (0, 0) for a step that verifies no draft."""
    info = StepInfo(pipeline)
    verifies = [op for op in pipeline.step.ops if info.has_role(op, "verify")]
    if not verifies or len(verifies[-1].values) < 2:
        return 0, 0
    return info.drafted_most_of(verifies[-1].values[1], batch), info.width(verifies[-1]) - 1


def drafting_can_stop(pipeline: Pipeline) -> bool:
    """Whether every draft op of the step can stop drafting (declares `off_at`), so that a step
    verifying no drafted token runs no drafter forward; else the draft runs whatever the budget."""
    from .ir.opdefs import OPS
    info = StepInfo(pipeline)
    return all("off_at" in OPS[op.name].attrs for op in pipeline.step.ops
               if info.has_role(op, "draft") and op.name in OPS)


def _drafting_stopped(pipeline: Pipeline, batch: int) -> bool:
    """Whether every draft op is off (its `off_at` reached) with `batch` live requests."""
    from .step.ops.common import off_at_live
    info = StepInfo(pipeline)
    return all(off_at_live(op, batch) for op in pipeline.step.ops if info.has_role(op, "draft"))


def never_drafts(pipeline: Pipeline) -> bool:
    """Whether the step has draft ops and every one is off from one live request on (`off_at = 1`:
    a shrink table that found no draft paying at any batch size)."""
    if pipeline.step is None:
        return False
    info = StepInfo(pipeline)
    return any(info.has_role(op, "draft") for op in pipeline.step.ops) and _drafting_stopped(pipeline, 1)


def predicted_speedup(pipeline: Pipeline, target: Target, batch: int, alpha: float = 0.7, context: int = 512) -> float:
    most, width = _drafted(pipeline, batch)
    n = min(width, -(-most // batch))
    if n <= 0 and (width == 0 or _drafting_stopped(pipeline, batch)):
        return 1.0
    verifier, _, drafts = step_forwards(pipeline, batch)
    if n <= 0:  # nothing verified, and the draft still runs
        ar = forward_seconds(pipeline, verifier, batch, target, context, batch)
        return ar / (ar + draft_seconds(pipeline, drafts, batch, target, context))
    tau = emission_curve(pipeline, alpha)[n]
    step = _step_seconds(pipeline, verifier, batch, n, draft_seconds(pipeline, drafts, batch, target, context),
                         target, context)
    return tau * forward_seconds(pipeline, verifier, batch, target, context, batch) / step


def slow_batches(pipeline: Pipeline, target: Target, alpha: float = 0.7, sizes=(1, 8, 32, 64)) -> list[tuple[int, float]]:
    """(batch, predicted speedup) where the step as it is prices below plain decoding."""
    out = []
    for b in sizes:
        s = predicted_speedup(pipeline, target, b, alpha)
        if s < 1.0:
            out.append((b, s))
    return out


def verifier_of(pipeline: Pipeline) -> str:
    """The model the step's last verify runs."""
    return _last_verify(StepInfo(pipeline)).symbols[0][1:]


def verifies_whole_draft(pipeline: Pipeline, batch: int) -> bool:
    most, width = _drafted(pipeline, batch)
    return most >= batch * width
