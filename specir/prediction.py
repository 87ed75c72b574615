"""What the cost model predicts for a pipeline without running it, and the gap to its ceiling.

Contract: `predict(pipeline, target, calibration, profile, overhead_scale)` -> `Prediction`: tau
(acceptance_model), the step time (step_time) and the AR step time of the same target, and
speedup = tau * AR step / step. `gaps(prediction)` names what limits the pipeline: the speedup it
would have with free drafting (draft), with a verify as cheap as an AR step (verify), with every
drafted token on the accepted path accepted (acceptance) or with no step overhead (overhead);
the biggest is `biggest`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .acceptance_model import Profile
from .batch_schedule import never_drafts
from .calibration import Calibration
from .ir.nodes import Pipeline
from .load import spec_folder
from .runtime.baseline import ar_pipeline
from .step.interfaces import StepInfo
from .step_time import StepTime, step_time
from .targets import Target


@dataclass
class Prediction:
    tau: float
    step: StepTime
    ar_step: float
    max_tau: float

    @property
    def speedup(self) -> float:
        return self.tau * self.ar_step / self.step.total if self.step.total > 0 else 1.0

    def as_dict(self) -> dict:
        return {"tau": self.tau, "speedup": self.speedup, "step_seconds": self.step.total,
                "ar_step_seconds": self.ar_step, "draft_seconds": self.step.draft,
                "verify_seconds": self.step.verify, "overhead_seconds": self.step.overhead}


def draft_op(pipeline: Pipeline):
    from .ir.opdefs import role_of
    return next((op for op in (pipeline.step.ops if pipeline.step else ()) if role_of(op) == "draft"), None)


def mid_level(pipeline: Pipeline):
    """(drafter's op, the mid-level op) of a two-level step (an op with the `mid-verify` effect), else None."""
    if pipeline.step is None:
        return None
    info = StepInfo(pipeline)
    for op in pipeline.step.ops:
        if "mid-verify" in info.interfaces(op).effects:
            return info.producer.get(op.values[1]), op
    return None


def proposed_ids(model, base=None):
    """The ids a drafting model can propose: an int N (ids below N; its whole vocabulary, or an id-prefix
    head) or a frozenset (ids its logits keep: draft-vocab{order=frequency}'s ranked ids, derived as the
    loader derives them; relative paths are relative to `base`, the .spec's folder)."""
    from .ir.opdefs import narrows_vocab
    from .ir.verifier import logits_head
    from .runtime.checkpoint_tensors import derived_weight, model_folder
    head, _ = logits_head(model.graph)
    if not narrows_vocab(head):
        return model.graph.result_type.width
    ids = derived_weight(model, model.weight(head.attrs["ids"]), model_folder(model, base), base)
    return frozenset(ids.tolist())


def predict(pipeline: Pipeline, target: Target, calibration: Calibration, profile: Profile | None,
            overhead_scale: float = 1.0, context: int = 512) -> Prediction:
    """A two-level step's tau needs the mid level's ranks: the profile measures them once per mid
    region (Profile.mid_ranks)."""
    op = draft_op(pipeline)
    two_level = mid_level(pipeline)
    drafter = pipeline.model(op.symbols[0].lstrip("@")) if op is not None and op.symbols else None
    if profile is not None and drafter is not None and drafter.graph is not None:
        profile = profile.within(proposed_ids(drafter, spec_folder(pipeline.source_file)))  # draft-vocab: ids outside the head never drafted
    if profile is None:
        tau = 1.0
    elif two_level is not None:
        inner, cascade = two_level
        tau = profile.tau(inner, cascade, profile.mid_ranks(pipeline.model(cascade.symbols[0])))
    else:
        tau = profile.tau(op)
    ar_step = step_time(ar_pipeline(pipeline, stock=False), target, calibration, context, overhead_scale)
    if never_drafts(pipeline):  # every draft op off from one live request: the step is AR's
        tau, step = 1.0, ar_step
    else:
        step = step_time(pipeline, target, calibration, context, overhead_scale)
    ar = ar_step.total
    max_tau = float(StepInfo(pipeline).emit_width) if pipeline.step is not None else 1.0
    return Prediction(tau, step, ar, max_tau)


def gaps(p: Prediction) -> dict:
    """Speedup with each limit lifted, and the biggest gap by name."""
    s = p.step
    verify_floor = min(s.verify, p.ar_step)

    def speedup(tau, total):
        return tau * p.ar_step / total if total > 0 else float("inf")
    lifted = {
        "draft": speedup(p.tau, s.total - s.draft),
        "verify": speedup(p.tau, s.total - s.verify + verify_floor),
        "acceptance": speedup(p.max_tau, s.total),
        "overhead": speedup(p.tau, s.total - s.overhead),
    }
    biggest = max(lifted, key=lambda k: lifted[k] - p.speedup)
    return {"predicted_speedup": p.speedup, "with_limit_lifted": lifted, "biggest": biggest,
            "seconds": {"draft": s.draft, "verify": s.verify, "overhead": s.overhead, "ar_step": p.ar_step},
            "tau": p.tau, "max_tau": p.max_tau}
