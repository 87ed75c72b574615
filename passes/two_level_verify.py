"""two-level-verify: a cheaper mid-level verifier between the drafter and the declared target.

Preconditions: the step drafts (any draft op: a chain, a tree or n-grams) and its final verify, on
the declared target, reads that draft. Postconditions: a `draft.cascade @mid` op sits between
them: @mid keeps the draft's prefix it agrees with and extends it by `extend` tokens of its own
(specir/step/ops/draft_cascade.py); the target verifies that chain (`verify.chain`, the target's
graph takes mask<causal>, commit kv = "prefix"); acceptance reads the cascade's chain. The target
is still the last judge, so the output is the target's. Provides the fact `two-level-verify`.
Mid-level kinds (`kind`):
- `layers` (default): a new region @mid derived from the target: its first `layers` decoder layers
  (0: half of them; attention, recurrent or MLP-only layers alike, numbered as the checkpoint's
  weights are; where no weight names a layer, one layer per token mixer's residual block), then the target's own final norm and lm_head (self-speculative: the same
  checkpoint's tensors, no extra weights; a hybrid target's mid level keeps its own recurrent state);
- `window`: @mid is the target with every attention layer limited to the last `window` rows
  (TriForce-style, pays at long context; recurrent layers are unchanged);
- `model`: the pipeline's model `@<model>` (a mid-size model the user adds with
  `model @mid = import("...")`, or `specir init --mid DIR|zoo:NAME`), which must share the
  target's vocabulary; the zoo ships `zoo:code-mid` (between code-drafter and code-target, distilled
  from the target): `specir init --mid zoo:code-mid > p.spec`, then
  `-p "two-level-verify{kind=model,model=mid}"`.
A tree draft gives @mid mask<tree>.

Before:
    %d = draft.chain @drafter, %ctx {k = 4} : tokens
    %lg = verify.chain @target, %ctx, %d : logits
    %acc = accept.greedy %d, %lg : accepted
After (two-level-verify{layers=1}):
    model @mid attributes {layers = 1, mid_of = "target", source = ...} { <target's layer 0, norm, lm_head> }
    %d = draft.chain @drafter, %ctx {k = 4} : tokens
    %d.mid = draft.cascade @mid, %ctx, %d : tokens          (extend = 2, the default)
    %lg = verify.chain @target, %ctx, %d.mid : logits
    %acc = accept.greedy %d.mid, %lg : accepted
"""
from __future__ import annotations

import re
from dataclasses import replace

from specir.declared_target import read as read_declared
from specir.errors import SpecirError
from specir.ir.nodes import Attrs, Model, Op, Pipeline
from specir.ir.opdefs import MAX_DRAFT_TOKENS, role_of, without_defaults
from specir.ir.ops_recurrent import mixes_tokens, weights_read
from specir.ir.types import TOKENS
from specir.pass_infra import Option, Pass
from specir.step.interfaces import interfaces_of

KINDS = ("layers", "window", "model")
LAYER_OF_WEIGHT = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")  # HF's decoder-layer weight names


def decoder_layer(op) -> int | None:
    """The decoder layer an op belongs to, read from the checkpoint names of the weights it uses
    (`model.layers.N.`, `backbone.layers.N.`, ...); None for an op that uses no layer's weight."""
    found = {int(m.group(1)) for name in weights_read(op) if (m := LAYER_OF_WEIGHT.search(name))}
    return min(found) if found else None


def layer_cuts(model: Model) -> list[int]:
    """Per decoder layer, in order, the index of the op producing the residual stream value it starts
    from (residual_stream): the last stream value before the layer's first op. Layers as the
    checkpoint's weight names number them (attention, recurrent and MLP-only layers alike), or,
    where no weight names a layer (a hand-written graph), one per stream value that a token mixer
    (an attention or recurrent op) follows, so a mixer's conv and scan, or parallel mixers, are one."""
    return _cuts(model.graph.ops, residual_stream(model))


def _cuts(ops, stream: list[int]) -> list[int]:
    """layer_cuts over `ops` and their residual stream."""
    first: dict[int, int] = {}
    for i, op in enumerate(ops):
        n = decoder_layer(op)
        if n is not None:
            first.setdefault(n, i)
    starts = ([first[n] for n in sorted(first)] if first else
              [i for i, op in enumerate(ops) if mixes_tokens(op)])
    cuts = [max(j for j in stream if j < i) for i in starts if i > stream[0]]
    return sorted(set(cuts))


def residual_stream(model: Model) -> list[int]:
    """Indices of the ops producing the residual stream, embedding first: from the head (the ops after
    the last residual add, which end in the logits) back through each residual `add` along its
    earlier-produced operand (the stream: a layer's branch is computed from it, so comes later)."""
    ops = model.graph.ops
    producer = {op.result: i for i, op in enumerate(ops) if op.result}
    i = producer.get(model.graph.result)
    while i is not None and ops[i].name != "add":  # the head: norm, lm_head, logit scaling
        i = producer.get(ops[i].operands[0]) if ops[i].operands else None
    if i is None:
        raise SpecirError(f"two-level-verify{{kind=layers}} found no residual stream in @{model.name}'s graph "
                          "(no residual add before its logits)", location=model.loc,
                          hint="use kind=model with a smaller model, or kind=window")
    stream = [i]
    while ops[i].name == "add":
        produced = [producer[o] for o in ops[i].operands if o in producer]
        if not produced:  # an add of the graph's inputs: the stream starts there
            break
        i = min(produced)
        stream.append(i)
    return stream[::-1]


def layer_prefix(model: Model, layers: int) -> Model:
    """`model`'s first `layers` decoder layers (layer_cuts), then its head (final norm, lm_head and
    what follows) reading the residual stream where layer `layers` starts."""
    ops = list(model.graph.ops)
    stream = residual_stream(model)
    end = stream[-1]  # the last residual add: the head follows it
    cut = _cuts(ops, stream)[layers]
    kept_value, end_value = ops[cut].result, ops[end].result
    head = [replace(op, operands=tuple(kept_value if o == end_value else o for o in op.operands))
            for op in ops[end + 1:]]
    kept = ops[:cut + 1] + head
    used = set().union(*(weights_read(op) for op in kept))
    weights = tuple(w for w in model.weights if w.name in used)
    graph = replace(model.graph, ops=tuple(kept))
    return replace(model, weights=weights, graph=graph)


def windowed(model: Model, window: int) -> Model:
    """`model` with every attention op seeing at most the last `window` rows."""
    ops = tuple(replace(op, attrs=op.attrs.set(window=min(window, op.attrs.get("window") or window)))
                if op.name == "attention" else op for op in model.graph.ops)
    return replace(model, graph=replace(model.graph, ops=ops))


class TwoLevelVerify(Pass):
    name = "two-level-verify"
    options = {
        "kind": Option(str, "layers", "the mid level: layers (the target's first layers), window (the target "
                       "with a short KV window) or model (a model of the pipeline)", KINDS),
        "layers": Option(int, 0, "kind=layers: decoder layers the mid level keeps; 0 takes half",
                         min=0, max=1024, search=(0, 1, 2, 4, 8, 16)),
        "window": Option(int, 256, "kind=window: KV rows the mid level attends over", min=1, max=1 << 20,
                         search=(64, 256, 1024)),
        "model": Option(str, "mid", "kind=model: the mid model's symbol, without '@' (drafter: the pipeline's "
                        "drafter judges n-gram drafts, with ngram-draft after this pass)", search=("mid", "drafter")),
        "extend": Option(int, 2, "tokens the mid level adds after its accepted prefix", min=1,
                         max=MAX_DRAFT_TOKENS, search=(1, 2, 3, 4, 6)),
    }
    provides = frozenset({"two-level-verify"})

    def run(self, pipeline: Pipeline) -> Pipeline:
        ops = list(pipeline.step.ops)
        cascade = next((op for op in ops if "mid-verify" in interfaces_of(op).effects), None)
        if cascade is not None:
            raise SpecirError(f"the step already verifies in two levels ({cascade.name} is there)",
                              hint="drop the second two-level-verify")
        declared = read_declared(pipeline)
        verifies = [i for i, op in enumerate(ops) if role_of(op) == "verify"]
        if not verifies:
            raise SpecirError("two-level-verify needs a step that verifies a draft; this step verifies nothing",
                              hint="a step needs verify.chain @target, %ctx, %draft")
        vi = verifies[-1]
        verify = ops[vi]
        if verify.name == "verify.packed":
            raise SpecirError("two-level-verify runs before batch-fusion (the mid level drafts what the packed "
                              "verify then fuses)", location=verify.loc,
                              hint='order the passes "...,two-level-verify,batch-fusion"')
        target_name = declared.model if declared else verify.symbols[0][1:]
        producers = {op.result: op for op in ops if op.result}
        draft = producers.get(verify.values[1]) if len(verify.values) > 1 else None
        if draft is None or role_of(draft) != "draft":
            raise SpecirError(f"two-level-verify puts a mid level between a draft and the target; the final "
                              f"{verify.name} verifies no draft", location=verify.loc,
                              hint="start from a drafting pipeline (specir init --drafter DIR|ngram)")
        target = pipeline.model(target_name)
        if target is None or target.graph is None:
            raise SpecirError(f"the declared target @{target_name} has no expanded graph",
                              hint="load the pipeline through specir (imports are expanded)")
        tree = draft.type is not None and draft.type.name == "tree"
        mid, models = self._mid(pipeline, target, tree)
        mid_value = draft.result + ".mid"
        cascade = Op("draft.cascade", ("@" + mid.name, verify.values[0], draft.result),
                     Attrs(without_defaults("draft.cascade", {"extend": self.extend})), mid_value, TOKENS)
        rewired = []
        for i, op in enumerate(ops):
            if i == vi:
                rewired.append(cascade)
                op = replace(op, name="verify.chain", operands=op.operands[:2] + (mid_value,))
            elif i > vi and draft.result in op.values:
                op = replace(op, operands=tuple(mid_value if o == draft.result else o for o in op.operands))
            if op.name == "commit":
                op = replace(op, attrs=op.attrs.set(kv=None))
            rewired.append(op)
        models = tuple(m.with_mask("causal") if m.name == target_name else m for m in models)
        return replace(pipeline, models=models, step=replace(pipeline.step, ops=tuple(rewired)))

    def _mid(self, pipeline: Pipeline, target: Model, tree: bool) -> tuple[Model, tuple[Model, ...]]:
        models = pipeline.models
        if self.kind == "model":
            mid = pipeline.model(self.model)
            if mid is None or mid.graph is None:
                known = ", ".join("@" + m.name for m in models) or "none"
                raise self.option_error("model", f"kind=model needs the mid model @{self.model} in the pipeline "
                                        f"(models: {known})", 'add model @mid = import("path/to/checkpoint") and '
                                        'pass two-level-verify{kind=model,model=mid}')
            if mid.name == target.name:
                raise self.option_error("model", "the mid model cannot be the declared target itself",
                                        "use kind=layers (the target's first layers) or kind=window")
            if mid.graph.result_type.width != target.graph.result_type.width:
                raise self.option_error("model", f"@{mid.name} has a vocabulary of {mid.graph.result_type.width} "
                                        f"tokens, the target @{target.name} one of "
                                        f"{target.graph.result_type.width}", "the mid model needs the target's "
                                        "tokenizer")
        else:
            if pipeline.model("mid") is not None:
                raise SpecirError(f"two-level-verify{{kind={self.kind}}} adds a model @mid, but the pipeline "
                                  f"already has one", hint="use kind=model,model=mid to verify with it, or "
                                                           "rename it")
            if self.kind == "layers":
                n = len(layer_cuts(target))
                keep = self.layers or max(1, n // 2)
                if keep >= n:
                    hint = (f"use layers={max(1, n // 2)} (0 takes half)" if n >= 2 else
                            "kind=layers needs a target of at least 2 layers; use kind=model with a smaller model")
                    raise self.option_error("layers", f"the target has {n} layers; a mid level keeps fewer "
                                            f"(got layers={keep})", hint)
                mid = layer_prefix(target, keep).with_attrs(mid_of=target.name, layers=keep)
            else:
                mid = windowed(target, self.window).with_attrs(mid_of=target.name, window=self.window)
            mid = replace(mid, name="mid")
            index = [m.name for m in models].index(target.name)
            models = models[:index + 1] + (mid,) + models[index + 1:]
        want = "tree" if tree else "causal"
        if mid.mask_kind != want:
            changed = mid.with_mask(want)
            models = tuple(changed if m.name == mid.name else m for m in models)
            mid = changed
        return mid, models

