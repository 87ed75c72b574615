"""What a step op's definition declares (`OpDef.step`), read by the verifier, the cost model, cache
sizing, kernel planning and the engine. Nothing else looks at step op names.

`StepInterfaces`:
- `width(op, info) -> int`: tokens per request the op drafts (draft ops) or verifies in one target
  forward (verify ops, the pending token included); 0 for the others. One formula per op.
- `depth(op, info) -> int`: the longest path of drafted tokens (draft ops), or the most tokens one
  step can emit (verify ops: 1 + the depth of their draft); 0 for the others.
- `forwards(op, info) -> [ModelForward]`: the model forwards the op runs per step (model, new
  tokens T per request, how many, rows past the committed length they write, rows per request
  whose logits the op then ranks over the vocabulary). The cost model prices them (ranked rows at
  specir/step/ranking.BYTES_PER_LOGIT per vocabulary entry), cache sizing adds their scratch rows,
  kernel planning compiles their shapes.
- `effects`: what the op reads and writes, as documentation the verifier checks against
  (`"draft"`, `"verify"`, `"accept"`, `"commit"`: the role; `"budget"`: narrows a draft;
  `"host"`: reads host state).
- `needs_host`: True when its semantics read host state (the request's token history), so the
  engine runs it between captured device segments.
- `lower(ctx, op, args) -> value`: the op's semantics in torch over batched tensors, shared by every
  backend (specir/step/ops/*); capture-safe (no host read) unless `needs_host`.
- `lowerings`: optional backend-specific implementations with the same contract ("triton": a fused
  kernel), differentially tested against `lower`.
- `setup(ctx, op)`: allocates the op's per-session state (drafter feeds, static buffers).
- `overhead_s`: fixed seconds per step the cost model adds (host work, small launches).
- `variant(ctx, op) -> hashable`: optional; host-known state (never a device read) that selects
  what the op launches this step (e.g. drafting off at a large live batch); the program keeps one
  capture per variant of the segment holding the op.
- `accepted(op, profile) -> ((sequence, i) -> int)`: draft ops whose mean accepted length the cost
  model predicts (specir/acceptance_model.py): how many of the op's drafted tokens the target
  accepts at position i of a profiled sequence (the target's greedy continuation, with the
  drafter's ranks along it); the acceptance model simulates the steps with it. A draft op that
  lacks it gets no prediction (a SpecirError naming it), never a silent tau of 1.
- `emission(op, info, alpha, order) -> [float]`: optional, draft ops (and ops that narrow a
  draft); the expected tokens a step emits per request when the verify keeps n of the op's nodes,
  n = 0 .. width, at per-token acceptance alpha: its n most confident (`order = "confidence"`) or
  its first n as listed (`"listed"`) (specir/step/emission.py; batch-fusion's shrink table reads
  it). Without it a draft is priced as one path of its depth (`emission_of`).
- `at_live(op, live) -> op`: optional; the op as it runs with `live` requests decoding, its
  live-dependent attributes resolved (draft.tree: its topk_at entry as topk); the shrink table
  prices that op's forwards at that batch size.
- `narrow(op, info, alpha, nodes_by_live, deepest_by_live=None) -> dict`: optional, draft ops; the
  attributes that make the op draft no more work than a budget keeping nodes_by_live[b - 1] of its
  nodes per request at b live requests (its share) needs, without changing the emission of those
  nodes (draft.tree: topk_at), and no deeper than the most nodes one request can keep then,
  deepest_by_live[b - 1] (default: the share; a budget split by confidence can give one request
  the whole budget) (draft.tree: depth_at); {} when nothing narrower does; more nodes at a size
  never give a narrower op there. batch-fusion{narrow=true} sets them.
- `drafted_most(op, info, live) -> int`: optional, ops that narrow a draft (batch.budget): the most
  drafted nodes (pending tokens excluded) the op's result holds over all `live` live requests;
  without it, live x the op's width. A packed verify sizes its forward from it (no host read).
A step op without interfaces is a verifier error naming it; a missing one is never a silent 0.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelForward:
    model: str  # the model symbol, without '@'
    tokens: int  # new tokens per request (T)
    count: int = 1  # forwards of this shape per step
    purpose: str = ""  # catch-up | draft | tree-level | verify
    scratch: int = 0  # rows past the committed length written, at most (offsets + T)
    mask_width: int = 0  # U of a tree mask; 0 for causal forwards
    packed: bool = False  # one-token rows grouped by request (ForwardInputs.row_start); tokens: a request's most rows
    ranked: int = 0  # rows per request whose full-vocabulary logits the op ranks after the forward (ranking.py)


@dataclass(frozen=True)
class StepInterfaces:
    width: Callable
    depth: Callable
    forwards: Callable
    lower: Callable
    effects: tuple[str, ...] = ()
    needs_host: bool = False
    lowerings: dict = field(default_factory=dict)
    setup: Callable | None = None
    overhead_s: float = 0.0
    variant: Callable | None = None
    accepted: Callable | None = None
    emission: Callable | None = None
    narrow: Callable | None = None
    at_live: Callable | None = None
    drafted_most: Callable | None = None
    # the StepBackend kernels hooks (specir/step/backend.py) its lowering calls besides the forwards,
    # e.g. ("top_log_probs", "expand_tree"): a backend's build lists the kernels that implement them
    backend_calls: tuple[str, ...] = ()

    def lowering_for(self, backend: str) -> Callable:
        return self.lowerings.get(backend, self.lower)


def interfaces_of(op) -> StepInterfaces:
    """The step interfaces `op`'s definition declares; a SpecirError naming the op when it has none."""
    from ..errors import SpecirError
    from ..ir.opdefs import OPS
    step = getattr(OPS.get(op.name), "step", None)
    if step is None:
        raise SpecirError(f"step op {op.name!r} declares no step interfaces (width, forwards, lowering)",
                          location=op.loc, hint="a step op's OpDef needs step=StepInterfaces(...) "
                                                "(see specir/step/interfaces.py)")
    return step


class StepInfo:
    """Facts about a pipeline's step that interfaces need: the op producing a value, widths."""

    def __init__(self, pipeline):
        self.pipeline = pipeline
        self.producer = {op.result: op for op in pipeline.step.ops if op.result} if pipeline.step else {}

    def interfaces(self, op) -> StepInterfaces:
        return interfaces_of(op)

    def width(self, op) -> int:
        return int(self.interfaces(op).width(op, self))

    def width_of(self, value: str | None) -> int:
        """The width of the op producing `value` (0 when it is not an op's result)."""
        op = self.producer.get(value) if value else None
        return self.width(op) if op is not None else 0

    def depth(self, op) -> int:
        return int(self.interfaces(op).depth(op, self))

    def depth_of(self, value: str | None) -> int:
        op = self.producer.get(value) if value else None
        return self.depth(op) if op is not None else 0

    def emission_of(self, value: str, alpha: float, order: str = "confidence") -> list[float]:
        """The emission curve (specir/step/emission.py) of the draft `value` cut in `order`, from its
        producer's `emission` interface, or one path of its depth where the producer declares none."""
        from .emission import chain_emission
        op = self.producer.get(value)
        if op is None:
            raise KeyError(f"no step op produces {value!r}, so it has no emission curve")
        declared = self.interfaces(op).emission
        if declared is not None:
            return declared(op, self, alpha, order)
        return chain_emission(alpha, self.depth(op), self.width(op))

    def drafted_most_of(self, value: str, live: int) -> int:
        """The most drafted nodes `value` holds over `live` live requests (its producer's
        `drafted_most`, else live x its width)."""
        op = self.producer[value]
        declared = self.interfaces(op).drafted_most
        return int(declared(op, self, live)) if declared is not None else live * self.width(op)

    def has_role(self, op, role: str) -> bool:
        return role in self.interfaces(op).effects

    @property
    def emit_width(self) -> int:
        """Tokens one step can emit per request at most (accepted drafts + the bonus token)."""
        depths = [self.depth(op) for op in self.pipeline.step.ops if self.has_role(op, "verify")]
        return max(depths, default=1)

    def forwards(self) -> list[ModelForward]:
        out = []
        for op in self.pipeline.step.ops:
            out += self.interfaces(op).forwards(op, self)
        return out

    def ring_nodes(self, model) -> int:
        """Recurrent state-ring nodes per request slot of `model` in this step: its forwards' scratch
        rows, the emit width and one more, widened within a byte budget (recurrent_state.ring_nodes)."""
        from ..ir.ops_recurrent import model_state_specs  # local: ir.opdefs imports the step ops, which import this
        from ..runtime.dtypes import dtype_bytes
        from ..runtime.recurrent_state import ring_nodes
        return ring_nodes(model_state_specs(model), self.scratch_rows().get(model.name, 0) + self.emit_width + 1,
                          dtype_bytes(model))

    def scratch_rows(self) -> dict[str, int]:
        """Rows past the committed length each model's cache needs per step."""
        rows: dict[str, int] = {}
        for f in self.forwards():
            rows[f.model] = max(rows.get(f.model, 0), f.scratch)
        return rows
