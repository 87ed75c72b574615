"""canonicalize: dead-value elimination and attribute normalisation.

Preconditions: none. Postconditions: no pure op whose result is unused; no weight that no op
references; float attributes are floats; attributes equal to their op's default are absent.

Before:
    %x = rms_norm %h {eps = 1, group = 0, weight = "n"} : act<8>
    %unused = linear %h {weight = "w"} : act<8>
After:
    %x = rms_norm %h {eps = 1.0, weight = "n"} : act<8>
(and the weight "w" is dropped if nothing else reads it).
"""
from __future__ import annotations

from dataclasses import replace

from specir.ir.nodes import Attrs, Op, Pipeline
from specir.ir.opdefs import OPS, without_defaults
from specir.ir.ops_recurrent import weights_read
from specir.pass_infra import Pass


def normalise_attrs(op: Op) -> Op:
    opdef = OPS.get(op.name)
    if opdef is None:
        return op
    attrs = {}
    for key, value in op.attrs.items():
        spec = opdef.attrs.get(key)
        if spec is not None and spec.kind == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        attrs[key] = value
    return replace(op, attrs=Attrs(without_defaults(op.name, attrs)))


def eliminate_dead(ops: tuple[Op, ...], live_roots: set[str]) -> tuple[Op, ...]:
    """Drop pure ops whose results nothing uses (iterating to a fixed point, back to front)."""
    used = set(live_roots)
    kept = []
    for op in reversed(ops):
        opdef = OPS.get(op.name)
        pure = opdef.pure if opdef else False
        if pure and op.result is not None and op.result not in used:
            continue
        kept.append(op)
        used.update(op.values)
    return tuple(reversed(kept))


class Canonicalize(Pass):
    name = "canonicalize"

    def run(self, pipeline: Pipeline) -> Pipeline:
        models = []
        for m in pipeline.models:
            if m.graph is None:
                models.append(m)
                continue
            ops = eliminate_dead(tuple(normalise_attrs(op) for op in m.graph.ops), {m.graph.result})
            read = set().union(*(weights_read(op) for op in ops))
            weights = tuple(w for w in m.weights if w.name in read)
            models.append(replace(m, weights=weights, graph=replace(m.graph, ops=ops)))
        step = pipeline.step
        if step is not None:
            step = replace(step, ops=eliminate_dead(tuple(normalise_attrs(op) for op in step.ops), set()))
        return replace(pipeline, models=tuple(models), step=step)
