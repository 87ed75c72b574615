"""The step lowered op by op, in IR order, into segments.

Contract: `StepProgram(pipeline, backend)` takes each step op's lowering from its definition
(`OpDef.step.lowering_for(backend.name)`) and groups consecutive ops into segments: a device
segment (ops that read and write only tensors) or a host segment (one op whose interfaces say
`needs_host`). `run(ctx)` executes one step:
- host ops run eagerly (a forward one launches may itself be a replayed graph:
  StepContext.launch); the tensors of their results are copied into static buffers (one set per
  result shape), so the device segment after them reads fixed addresses;
- device segments run eagerly where the backend does not capture (CPU). For a capturing backend a
  segment whose inputs are all stable (the context's persistent tensors, host results' static
  buffers, outputs of captured segments) runs eagerly the first time it sees those inputs (which
  compiles the kernels and allocates lazily created buffers), is captured the second time and is
  replayed from then on; a segment reading a value an eager run produced runs eagerly. An op that
  declares a `variant` (host-known state choosing what it launches) has it evaluated once per
  step, before any segment runs, into `ctx.variants[id(op)]` (its lowering reads it there), and
  it is part of its segment's capture key: one capture per variant.
What a step computes is exactly its ops' semantics in order; capture only changes how it is
launched. Values flow through an environment keyed by the IR's value names.
`observer` (default None): an optional callable `observer(index, segment)` returning a context
manager that `run` enters around each segment's execution (a host segment's copies into its static
buffers included), for measurements (bench/host_ops.py counts the ATen ops each segment runs); it
changes nothing the step computes or launches.
`per_op=True` (profiling only, bench/step_profile.py --per-op): every op is a segment of its own, so an
observer prices each op apart (draft, verify, accept, commit); each device op is then its own capture,
which adds a graph boundary per op but changes nothing the step computes.
"""
from __future__ import annotations

import dataclasses

import torch

from .interfaces import StepInfo


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if dataclasses.is_dataclass(value):
        return [t for f in dataclasses.fields(value) for t in _tensors(getattr(value, f.name))]
    return []


def _to_static(value, buffers: dict, key):
    """A copy of `value` whose tensors live in buffers kept under (key, field, shape)."""
    if isinstance(value, torch.Tensor):
        k = (key, tuple(value.shape), value.dtype)
        buf = buffers.get(k)
        if buf is None:
            buf = buffers[k] = torch.empty_like(value)
        buf.copy_(value)
        return buf
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{f.name: _to_static(getattr(value, f.name), buffers, (key, f.name))
                                             for f in dataclasses.fields(value)})
    return value


@dataclasses.dataclass
class Segment:
    ops: list  # (op, lowering fn)
    host: bool
    reads: list  # values read from before the segment


class StepProgram:
    observer = None  # observer(index, segment) -> context manager around each segment's run (module docstring)

    def __init__(self, pipeline, backend, per_op: bool = False):
        self.pipeline, self.backend, self.per_op = pipeline, backend, per_op
        self.info = StepInfo(pipeline)
        step = pipeline.step
        self.ctx_name = step.params[0][0]
        self.segments: list[Segment] = []
        for op in step.ops:
            iface = self.info.interfaces(op)
            fn = iface.lowering_for(backend.name)
            if per_op or iface.needs_host or not self.segments or self.segments[-1].host:
                self.segments.append(Segment([], iface.needs_host, []))
            self.segments[-1].ops.append((op, fn))
        for seg in self.segments:
            defined = {op.result for op, _ in seg.ops if op.result}
            seg.reads = sorted({v for op, _ in seg.ops for v in op.values if v not in defined and v != self.ctx_name})

    def describe(self) -> list[dict]:
        return [{"ops": [op.name for op, _ in seg.ops], "host": seg.host} for seg in self.segments]

    @staticmethod
    def _run_ops(ops, ctx, env) -> dict:
        out = {}
        for op, fn in ops:
            value = fn(ctx, op, [out[v] if v in out else env[v] for v in op.values])
            if op.result is not None:
                out[op.result] = value
        return out

    def _variants(self, seg, ctx) -> tuple:
        return tuple(ctx.variants[id(op)] for op, _ in seg.ops if id(op) in ctx.variants)

    def run(self, ctx, session) -> None:
        """One step over `ctx`; `session.static`, `.captures`, `.warmed` and `.pool` keep buffers and graphs."""
        env = {self.ctx_name: ctx}
        stable = {self.ctx_name}
        ctx.variants = {id(op): iface.variant(ctx, op) for seg in self.segments for op, _ in seg.ops
                        if (iface := self.info.interfaces(op)).variant is not None}
        for index, seg in enumerate(self.segments):
            if self.observer is None:
                self._run_segment(index, seg, ctx, env, stable, session)
            else:
                with self.observer(index, seg):
                    self._run_segment(index, seg, ctx, env, stable, session)

    def _run_segment(self, index: int, seg: Segment, ctx, env: dict, stable: set, session) -> None:
        """Segment `index` of one step: its results go into `env` (and `stable` where they are)."""
        if seg.host:
            produced = self._run_ops(seg.ops, ctx, env)
            env.update({k: _to_static(v, session.static, (index, k)) for k, v in produced.items()})
            stable.update(produced)
            return
        if self.backend.captures and all(v in stable for v in seg.reads):
            key = (index, tuple((t.data_ptr(), tuple(t.shape), t.dtype)
                                for v in seg.reads for t in _tensors(env[v])), self._variants(seg, ctx))
            key += ("per-op",) * self.per_op  # a per-op program's captures never meet the whole-step program's
            entry = session.captures.get(key)
            if entry is None and key in session.warmed:
                entry = session.captures[key] = self.backend.capture(
                    lambda seg=seg, env=env: self._run_ops(seg.ops, ctx, env), session.pool)
            if entry is not None:
                replay, outputs = entry
                replay()
                env.update(outputs)
                stable.update(outputs)
                return
            session.warmed.add(key)
            env.update(self.backend.warm(lambda: self._run_ops(seg.ops, ctx, env)))
            return
        env.update(self._run_ops(seg.ops, ctx, env))
