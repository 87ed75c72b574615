"""Verifier and type inference.

`infer_types(p)` fills in result types the text left out; `verify(p)` checks a pipeline and
raises the first problem as a SpecirError at the offending op's location:
- every op is defined (opdefs) for its region, with the right operand count, operand types and
  attributes (required present, unknown rejected, kinds and choices respected);
- SSA: every value is defined once, before use; model symbols name models of the pipeline;
- result types agree with each op's type rule; weights referenced exist with fitting shapes;
- the step takes one `context`, ends with its one `commit`; every model shares one vocabulary.
Unexpanded `import(...)` models are skipped (loading expands them first).
"""
from __future__ import annotations

import difflib
import math
from dataclasses import replace

from ..declared_target import check_declared
from ..errors import SpecirError
from .nodes import Attrs, Graph, Model, Op, Pipeline, Step, Symbol
from .opdefs import MODEL_ATTRS, OPS, OpDef, TypeRuleError, narrows_vocab, proposes_only, role_of
from .types import WEIGHT_DTYPES, TensorType, Type

_KIND_NAMES = {"int": "an integer", "float": "a number", "str": "a string", "symbol": "a model (@name)", "bool": "true or false",
               "list": "a list", "dict": "a dictionary {k = v}"}


def _fits(kind: str, value) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str) and not isinstance(value, Symbol)
    if kind == "symbol":
        return isinstance(value, Symbol)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "list":
        return isinstance(value, tuple)
    if kind == "dict":
        return isinstance(value, Attrs)
    return True


class _Scope:
    """Type context handed to op type rules."""

    def __init__(self, pipeline: Pipeline, model: Model | None, where):
        self.pipeline, self.current_model, self.where = pipeline, model, where
        self.types: dict[str, Type] = {}

    def value_type(self, name: str) -> Type:
        return self.types[name]

    def weight_type(self, op: Op, name: str) -> TensorType:
        weight = self.current_model.weight(name) if self.current_model else None
        if weight is None:
            known = [w.name for w in self.current_model.weights] if self.current_model else []
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "declare it with `weight \"name\" : bf16[...]`"
            raise TypeRuleError(f"op {op.name} references weight {name!r}, which model "
                                f"@{self.current_model.name} does not declare", hint)
        return weight.type

    def model(self, symbol: str) -> Model | None:
        return self.pipeline.model(symbol)

    def model_mask(self, symbol: str) -> str | None:
        model = self.model(symbol)
        return model.mask_kind if model is not None else None


def _error(message: str, op_or_node, fallback, hint: str | None = None) -> SpecirError:
    loc = getattr(op_or_node, "loc", None) or getattr(fallback, "loc", None)
    path = None if loc else getattr(fallback, "source_file", None)
    return SpecirError(message, location=loc, hint=hint, path=path)


INT64 = (-(2**63), 2**63 - 1)


def bad_number(value) -> str | None:
    """What is wrong with a number anywhere in an attribute value (ints must fit in 64 bits, floats
    must be finite), or None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and not INT64[0] <= v <= INT64[1]:
            shown = str(v) if len(str(v)) <= 24 else f"{str(v)[:12]}...({len(str(v))} digits)"
            return f"integer {shown} does not fit in 64 bits"
        if isinstance(v, float) and not math.isfinite(v):
            return f"{v!r} is not a finite number"
        if isinstance(v, tuple):
            stack.extend(v)
        elif isinstance(v, Attrs):
            stack.extend(v.values())
    return None


def _check_model_attrs(model: Model, pipeline: Pipeline) -> None:
    """The attributes of a model region: numbers 64-bit and finite; the ones the runtime reads
    (opdefs.MODEL_ATTRS) of their kind, choices and range."""
    for key, value in model.attrs.items():
        problem = bad_number(value)
        spec = MODEL_ATTRS.get(key)
        if problem is None and spec is not None:
            if not _fits(spec.kind, value):
                problem = f"must be {_KIND_NAMES[spec.kind]}, got {value!r}"
            elif spec.choices and value not in spec.choices:
                problem = f"must be one of {list(spec.choices)}, got {value!r}"
            elif spec.valid and spec.valid(value):
                problem = f"{spec.valid(value)}, got {value!r}"
        if problem:
            raise _error(f"attribute {key!r} of @{model.name}: {problem}", model, pipeline,
                         (spec.doc if spec and spec.doc else "fix the model's attributes") +
                         " (specir init writes them from config.json)")


def _check_attrs(op: Op, opdef: OpDef, fallback) -> None:
    for key, value in op.attrs.items():
        spec = opdef.attrs.get(key)
        if spec is None:
            known = ", ".join(sorted(opdef.attrs)) or "none"
            close = difflib.get_close_matches(key, list(opdef.attrs), n=1)
            hint = (f"did you mean {close[0]!r}? " if close else "") + f"attributes of {op.name}: {known}"
            raise _error(f"unknown attribute {key!r} for op {op.name}", op, fallback, hint)
        if not _fits(spec.kind, value):
            raise _error(f"attribute {key!r} of {op.name} must be {_KIND_NAMES[spec.kind]}, got {value!r}",
                         op, fallback, spec.doc or f"write {key} = <{spec.kind}>")
        problem = bad_number(value)
        if problem:
            raise _error(f"attribute {key!r} of {op.name}: {problem}", op, fallback,
                         spec.doc or "integers are 64-bit and numbers finite")
        if spec.choices and value not in spec.choices:
            raise _error(f"attribute {key!r} of {op.name} must be one of {list(spec.choices)}, got {value!r}",
                         op, fallback, f"e.g. {key} = {_show(spec.choices[0])}")
        want = spec.valid(value) if spec.valid else None
        if want:
            raise _error(f"attribute {key!r} of {op.name} {want}, got {value!r}", op, fallback,
                         spec.doc or f"{key} {want}")
    for key, spec in opdef.attrs.items():
        if spec.required and key not in op.attrs:
            raise _error(f"op {op.name} needs attribute {key!r}", op, fallback,
                         f"{key}: {spec.doc}" if spec.doc else f"add {{{key} = ...}}")


def _show(value) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _check_operands(op: Op, opdef: OpDef, scope: _Scope, fallback) -> None:
    specs = list(opdef.operands)
    required = [s for s in specs if not s.optional]
    if not len(required) <= len(op.operands) <= len(specs):
        want = f"{len(required)}" if len(required) == len(specs) else f"{len(required)} to {len(specs)}"
        roles = ", ".join(("[" + s.role + "]") if s.optional else s.role for s in specs)
        raise _error(f"op {op.name} takes {want} operands ({roles}), got {len(op.operands)}", op, fallback,
                     f"{op.name} {', '.join(s.role for s in specs)}")
    # An optional operand in the middle is skipped when the count is short.
    if len(op.operands) < len(specs):
        skip = len(specs) - len(op.operands)
        specs = [s for s in specs if not (s.optional and (skip := skip - 1) >= 0)]
    for operand, spec in zip(op.operands, specs):
        if spec.types == ("@",):
            if not operand.startswith("@"):
                raise _error(f"operand {spec.role} of {op.name} must be a model (@name), got {operand}",
                             op, fallback, f"e.g. {op.name} @target, ...")
            if scope.model(operand) is None:
                known = ", ".join("@" + m.name for m in scope.pipeline.models) or "none"
                raise _error(f"unknown model {operand}", op, fallback, f"models in this pipeline: {known}")
            continue
        if operand.startswith("@"):
            raise _error(f"operand {spec.role} of {op.name} must be a %value, got model {operand}", op, fallback,
                         "models (@name) go only where an op takes one")
        if operand not in scope.types:
            raise _error(f"value {operand} is used before it is defined", op, fallback,
                         "define it earlier in this region (values are SSA)")
        got = scope.types[operand]
        if got.name not in spec.types:
            want = " or ".join(spec.types)
            raise _error(f"operand {spec.role} of {op.name} must be {want}, but {operand} is {got}", op, fallback,
                         f"pass a value of type {want}")


def _walk(ops, region: str, scope: _Scope, fallback, fill: bool) -> tuple[Op, ...]:
    out = []
    for op in ops:
        opdef = OPS.get(op.name)
        if opdef is None:
            close = difflib.get_close_matches(op.name, list(OPS), n=1)
            hint = f"did you mean {close[0]!r}?" if close else \
                f"known {region} ops: " + ", ".join(sorted(n for n, d in OPS.items() if d.region == region))
            raise _error(f"unknown op {op.name!r}", op, fallback, hint)
        if opdef.region != region:
            raise _error(f"op {op.name} belongs in a {opdef.region} region, not in a {region}", op, fallback,
                         f"move it into the {opdef.region}" + (" graph" if opdef.region == "model" else ""))
        if region == "step" and getattr(opdef, "step", None) is None:
            raise _error(f"step op {op.name} declares no step interfaces (width, forwards, lowering)", op, fallback,
                         "a step op's OpDef needs step=StepInterfaces(...); see specir/step/interfaces.py")
        _check_attrs(op, opdef, fallback)
        _check_operands(op, opdef, scope, fallback)
        try:
            inferred = opdef.infer(op, scope)
        except TypeRuleError as exc:
            raise _error(f"{op.name}: {exc.message}", op, fallback, exc.hint) from None
        if op.result is None and inferred is not None:
            raise _error(f"op {op.name} produces a value; name it (%x = {op.name} ...)", op, fallback,
                         f"%x = {op.name} ...")
        if op.result is not None:
            if inferred is None:
                raise _error(f"op {op.name} produces no value", op, fallback, f"write it as `{op.name} ...`")
            if op.result in scope.types:
                raise _error(f"value {op.result} is defined twice", op, fallback, "values are SSA: rename one")
            if op.type is None:
                if not fill:
                    raise _error(f"op {op.name} has no result type", op, fallback, f"write `: {inferred}`")
                op = replace(op, type=inferred)
            elif op.type != inferred:
                raise _error(f"type mismatch: {op.result} is declared {op.type}, but {op.name} gives {inferred}",
                             op, fallback, f"write `: {inferred}`")
            scope.types[op.result] = op.type
        out.append(op)
    return tuple(out)


def _check_graph(pipeline: Pipeline, model: Model, fill: bool) -> Graph:
    graph = model.graph
    seen = set()
    for w in model.weights:
        if w.name in seen:
            raise _error(f"weight {w.name!r} is declared twice in @{model.name}", w, model,
                         "declare each checkpoint tensor once")
        seen.add(w.name)
        if w.type.dtype not in WEIGHT_DTYPES:
            raise _error(f"weight {w.name!r} has dtype {w.type.dtype!r}", w, model,
                         "weight dtypes: " + ", ".join(WEIGHT_DTYPES))
        if (w.type.dtype == "i32") != ("ranked_by" in w.attrs):
            raise _error(f"weight {w.name!r}: i32 weights are token ids derived at load ({{ranked_by = ...}}), and "
                         f"only those", w, model, 'declare ids as i32[N] {ranked_by = "stdlib", vocab = V} '
                                                  "(draft-vocab{order=frequency} writes them)")
        bad = next((d for d in w.type.shape if not 1 <= d <= INT64[1]), None)
        if bad is not None:
            raise _error(f"weight {w.name!r} has dimension {bad}: dimensions must be positive (and fit in 64 bits)",
                         w, model, "write the checkpoint tensor's shape, e.g. bf16[4096, 4096]")
    scope = _Scope(pipeline, model, model)
    kinds = {}
    for name, t in graph.params:
        if name in scope.types:
            raise _error(f"parameter {name} is declared twice", graph, model, "rename one of them")
        scope.types[name] = t
        kinds[t.name] = t
    for required in ("ids", "positions", "mask"):
        if required not in kinds:
            raise _error(f"the graph of @{model.name} needs a `{required}` parameter", graph, model,
                         "graph(%ids: ids, %pos: positions, %mask: mask<causal>)")
    mask = kinds["mask"]
    if len(mask.params) != 1 or mask.params[0] not in ("causal", "tree"):
        raise _error(f"mask type must be mask<causal> or mask<tree>, got {mask}", graph, model, "%mask: mask<causal>")
    ops = _walk(graph.ops, "model", scope, model, fill)
    _check_cache_layers(model, ops)
    if graph.result not in scope.types:
        raise _error(f"graph of @{model.name} returns {graph.result}, which is not defined", graph, model,
                     "return the value of the last op (the logits)")
    got = scope.types[graph.result]
    if got != graph.result_type or got.name != "logits":
        raise _error(f"graph of @{model.name} is declared to return {graph.result_type} but returns {got}",
                     graph, model, "a model graph returns logits<vocab>")
    return replace(graph, ops=ops)


def _check_cache_layers(model: Model, ops) -> None:
    """Ops that write a KV-cache layer (OpDef.cache_layer) own their layer, each once; layer numbers
    are decoder layers 0..n-1, n the number of distinct `layer` values of the graph's ops (attention
    and recurrent mixers alike, so a hybrid's attention layer keeps its place among them)."""
    first: dict[int, Op] = {}
    writers = [(op, op.attrs[OPS[op.name].cache_layer]) for op in ops if OPS[op.name].cache_layer]
    for op, layer in writers:
        if layer in first:
            line = first[layer].loc.line if first[layer].loc else None
            raise _error(f"KV-cache layer {layer} of @{model.name} is written by two ops"
                         + (f" (the first at line {line})" if line else ""), op, model,
                         "each attention op owns one cache layer: number them 0, 1, ... in order")
        first[layer] = op
    count = len({op.attrs["layer"] for op in ops if isinstance(op.attrs.get("layer"), int)})
    for op, layer in writers:
        if layer >= count:
            raise _error(f"KV-cache layer {layer} is out of range: @{model.name} has {count} "
                         f"layer{'s' if count != 1 else ''}, numbered 0 to {count - 1}", op, model,
                         f"use layer = {count - 1} or less")


def _check_step(pipeline: Pipeline, step: Step, fill: bool) -> Step:
    scope = _Scope(pipeline, None, pipeline)
    if len(step.params) != 1 or step.params[0][1] != Type("context"):
        raise _error("the step takes exactly one parameter of type context", step, pipeline,
                     "step(%ctx: context) { ... }")
    scope.types[step.params[0][0]] = step.params[0][1]
    ops = _walk(step.ops, "step", scope, pipeline, fill)
    commits = [op for op in ops if op.name.startswith("commit")]
    if len(commits) != 1 or ops[-1] is not commits[0]:
        raise _error("the step must end with exactly one commit", ops[-1] if ops else step, pipeline,
                     "commit %ctx, %accepted")
    tree_verified = any(role_of(op) == "verify" and len(op.values) > 1
                        and getattr(scope.types.get(op.values[1]), "name", None) == "tree" for op in ops)
    if tree_verified and commits[0].attrs.get("kv", "prefix") not in ("compact", "in-place"):
        raise _error("a tree-verified step must commit with kv = \"compact\" or \"in-place\" (the accepted "
                     "path's KV rows move into place)", commits[0], pipeline, 'commit %ctx, %accepted {kv = "compact"}')
    return replace(step, ops=ops)


def logits_head(graph) -> tuple[Op | None, list[Op]]:
    """(the op that computes a graph's logits, the logits `scale` ops after it in graph order):
    the returned value's producer, walking back through scales (Falcon-H1's and Granite's multipliers)."""
    producer = {op.result: op for op in graph.ops}
    scales, op = [], producer.get(graph.result)
    while op is not None and op.name == "scale":
        scales.append(op)
        op = producer.get(op.operands[0])
    return op, scales[::-1]


def _narrowed_head(m) -> bool:
    """Whether the model's logits cover part of the vocabulary only (draft-vocab): its lm head is the
    first rows of the checkpoint's (ids of a prefix of the shared vocabulary), or its logits end in
    an op whose definition narrows the vocabulary (vocab_scatter: -inf off the kept ids)."""
    head, _ = logits_head(m.graph)
    if narrows_vocab(head):
        return True
    weight = m.weight(head.attrs.get("weight", "")) if head is not None else None
    return weight is not None and "rows_of" in weight.attrs


def _check_vocab(pipeline: Pipeline) -> None:
    vocab_of, narrowed = {}, {}
    for m in pipeline.models:
        if m.graph is not None:
            (narrowed if _narrowed_head(m) else vocab_of)[m.name] = m.graph.result_type
    full = next(iter(vocab_of.values()), None)
    for op in pipeline.step.ops if pipeline.step is not None else ():
        for sym in op.symbols:
            if sym.lstrip("@") in narrowed and not proposes_only(op):
                raise _error(f"@{sym.lstrip('@')} proposes from part of the vocabulary only (draft-vocab), so it "
                             f"cannot serve {op.name}: a judge needs the whole vocabulary",
                             op, pipeline, "verify with a model whose head is whole")
    for name, t in narrowed.items():
        if full is not None and (t.width or 0) > (full.width or 0):
            m = pipeline.model(name)
            raise _error(f"@{name} proposes from {t.width} token ids, more than the vocabulary of {full.width}",
                         m, pipeline, "draft-vocab's size must be below the shared vocabulary")
    if len(set(vocab_of.values())) > 1:
        first = next(iter(vocab_of))
        for m in pipeline.models:
            if m.name in vocab_of and vocab_of[m.name] != vocab_of[first]:
                raise _error(f"@{m.name} has vocabulary {vocab_of[m.name].width} but @{first} has "
                             f"{vocab_of[first].width}: target and drafter must share one tokenizer",
                             m, pipeline, "pick a drafter trained with the target's tokenizer")


def _run(pipeline: Pipeline, fill: bool) -> Pipeline:
    for key, value in pipeline.attrs.items():
        problem = bad_number(value)
        if problem is None and key == "facts" and not (isinstance(value, tuple) and all(isinstance(f, str) for f in value)):
            problem = "must be a list of strings (the facts passes provide)"
        if problem:
            raise _error(f"attribute {key!r} of pipeline {pipeline.name}: {problem}", pipeline, pipeline,
                         "fix the pipeline's attributes")
    for m in pipeline.models:
        _check_model_attrs(m, pipeline)
    models = tuple(m if m.is_import else replace(m, graph=_check_graph(pipeline, m, fill))
                   for m in pipeline.models)
    pipeline = replace(pipeline, models=models)
    _check_vocab(pipeline)
    if pipeline.step is not None:
        pipeline = replace(pipeline, step=_check_step(pipeline, pipeline.step, fill))
    check_declared(pipeline, lambda message, node, hint: _error(message, node, pipeline, hint))
    return pipeline


def require_step(pipeline: Pipeline, what: str) -> None:
    """SpecirError (at the pipeline) when it has no step: `what` (compiling, running, a pass) needs one."""
    if pipeline.step is None:
        raise _error(f"pipeline {pipeline.name} has no step: {what} needs one", pipeline, pipeline,
                     "add the decode step: step(%ctx: context) { ... commit %ctx, %accepted } (specir init writes one)")


def infer_types(pipeline: Pipeline) -> Pipeline:
    """Verify, filling in result types that were left out. Returns the typed pipeline."""
    return _run(pipeline, fill=True)


def verify(pipeline: Pipeline) -> None:
    """Raise SpecirError at the first problem; every result type must be present."""
    _run(pipeline, fill=False)
