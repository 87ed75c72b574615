"""The autoregressive baseline of a pipeline: its target, freshly imported (no passes), decoded
one token per forward with greedy acceptance. Every speedup is measured against it."""
from __future__ import annotations

from dataclasses import replace

from ..declared_target import final_verify
from ..errors import SpecirError
from ..ir.nodes import Op, Pipeline, Step
from ..ir.types import ACCEPTED, CONTEXT, logits


def target_name(pipeline: Pipeline) -> str:
    return final_verify(pipeline).symbols[0][1:]


def ar_pipeline(pipeline: Pipeline, stock: bool = True) -> Pipeline:
    name = target_name(pipeline)
    model = pipeline.model(name)
    if stock and model.attrs.get("source"):
        from ..importers import import_model
        try:
            fresh = import_model(name, str(model.attrs["source"]))
            model = replace(fresh, attrs=fresh.attrs.set(dtype=model.attrs.get("dtype")))
        except SpecirError:
            pass
    model = model.with_mask("causal")
    step = Step((("%ctx", CONTEXT),), (
        Op("verify.chain", (f"@{name}", "%ctx"), result="%logits", type=logits()),
        Op("accept.greedy", ("%logits",), result="%accepted", type=ACCEPTED),
        Op("commit", ("%ctx", "%accepted")),
    ))
    return Pipeline(pipeline.name + "_ar", models=(model,), step=step)
