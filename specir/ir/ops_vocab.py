"""`vocab_scatter`: logits over a subset of the vocabulary placed at their token ids.

draft-vocab{order=frequency} gives a drafter a head of the rows of its most frequent ids; this op
turns its logits<N> back into logits<V>: out[..., ids[n]] = x[..., n], every other id -inf (never
proposed: probability 0, never ranked before a kept id). The ids are an i32[N] weight (distinct,
each below `vocab`) that the loader derives (runtime/weights.py: `ranked_by`). Reference numerics:
backends/reference/vocab.py; Triton: backends/triton/kernels/vocab_scatter.py.

| op | operands | attributes | result |
|---|---|---|---|
| `vocab_scatter` | x: logits<N> | ids (weight i32[N]), vocab | logits<vocab> |
"""
from __future__ import annotations

from .opdefs import AttrSpec, OpDef, TypeRuleError, register_op, value
from .types import logits


def _infer_vocab_scatter(op, ctx):
    x = ctx.value_type(op.operands[0])
    ids = ctx.weight_type(op, op.attrs["ids"])
    vocab = op.attrs["vocab"]
    if ids.dtype != "i32" or len(ids.shape) != 1 or (x.width is not None and ids.shape[0] != x.width):
        raise TypeRuleError(f"ids {ids} do not match logits<{x.width}>",
                            "the ids are an i32 weight with one entry per input logit")
    ranked_over = ctx.current_model.weight(op.attrs["ids"]).attrs.get("vocab")
    if ranked_over != vocab:
        raise TypeRuleError(f"the ids are ranked over {ranked_over} token ids, the op scatters into {vocab}",
                            "give the ids weight and the op the same vocab")
    if x.width is not None and x.width > vocab:
        raise TypeRuleError(f"logits<{x.width}> do not fit a vocabulary of {vocab}", "vocab is the full vocabulary")
    return logits(vocab)


register_op(OpDef("vocab_scatter", "model", (value("x", "logits"),),
                  {"ids": AttrSpec("str", doc="the i32[N] weight holding each input logit's token id"),
                   "vocab": AttrSpec("int", doc="the full vocabulary: the result's width")},
                  _infer_vocab_scatter, weight_keys=("ids",), narrows_vocab=True,
                  doc="logits<vocab>: x[..., n] at id ids[n], -inf at every other id."))
