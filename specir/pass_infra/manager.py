"""PassManager: runs passes in order, checks facts, verifies after every pass.

Contract: each pass's `requires` facts must be present (in the pipeline's `facts` attribute);
after the pass its `provides` facts are added and the IR is verified. `target` is the target the
passes compile for (`specir compile --target T`; None under `specir opt`): each pass sees it as
`compile_target` while it runs, as TVM's passes see the PassContext's target; a pass that prices
with it prints what it chose in the IR, so the result never depends on it unseen. Any failure is a
SpecirError naming the failing pass and the passes that ran before it.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import declared_target
from ..errors import SpecirError
from ..ir.nodes import Pipeline
from ..ir.printer import print_pipeline
from ..ir.verifier import require_step, verify
from ..time_limit import TimeLimitExceeded, pass_timeout, time_limit
from . import registry
from .base import Pass


def facts_of(pipeline: Pipeline) -> tuple[str, ...]:
    return tuple(pipeline.attrs.get("facts", ()))


def with_facts(pipeline: Pipeline, facts) -> Pipeline:
    facts = tuple(sorted(set(facts)))
    return pipeline.with_(attrs=pipeline.attrs.set(facts=facts or None))


def _describe(declared) -> str:
    if declared is None or isinstance(declared, str):
        return declared or "none"
    return f"@{declared.model} = {declared.source} ({declared.digest[:19]}..., {declared.dtype})"


@dataclass
class PassRecord:
    name: str
    spelled: str
    changed: bool


@dataclass
class PassManager:
    passes: list[Pass]
    print_after_all: bool = False
    debug: bool = False
    out: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr, end=""))
    records: list[PassRecord] = field(default_factory=list)
    target: str | None = None

    def run(self, pipeline: Pipeline) -> Pipeline:
        verify(pipeline)
        if self.passes:
            require_step(pipeline, f"running pass {self.passes[0].name}")
        declared = declared_target.read(pipeline)
        done: list[str] = []
        for p in self.passes:
            before = ", ".join(done) or "none"
            missing = [f for f in sorted(p.requires) if f not in facts_of(pipeline)]
            if missing:
                provider = registry.provider_of(missing[0])
                hint = f"run {provider} before it" if provider else "no registered pass provides it"
                raise SpecirError(f"pass {p.name} requires fact {missing[0]!r}, which the pipeline lacks "
                                  f"(passes run before it: {before})", hint=hint,
                                  location=(getattr(p, "where", None) or {}).get(""))
            where = (getattr(p, "where", None) or {}).get("")
            try:
                p.compile_target = self.target
                with time_limit(pass_timeout(), f"pass {p.name}"):
                    result = p.run(pipeline)
            except SpecirError as exc:
                raise SpecirError(f"pass {p.name} failed (passes run before it: {before}): {exc.message}",
                                  location=exc.location or (None if exc.path else where), hint=exc.hint,
                                  path=exc.path) from None
            except TimeLimitExceeded as exc:
                raise SpecirError(f"pass {p.name} did not finish within {exc.seconds:g} s (passes run before it: "
                                  f"{before})", location=where,
                                  hint="the pass may loop forever; raise the limit with --pass-timeout SECONDS "
                                       "if it is only slow") from None
            except SystemExit as exc:
                raise SpecirError(f"pass {p.name} called sys.exit({exc.code!r}) (passes run before it: {before})",
                                  location=where, hint="a pass returns the pipeline or raises an error; it must "
                                                       "not exit the process") from None
            except RecursionError:
                raise SpecirError(f"pass {p.name} recursed too deeply (passes run before it: {before})",
                                  location=where, hint="this is a bug in the pass (or an IR nested too deeply "
                                                       "for it)") from None
            except Exception as exc:
                if self.debug:
                    raise
                raise SpecirError(f"pass {p.name} crashed (passes run before it: {before}): "
                                  f"{type(exc).__name__}: {exc}", location=where,
                                  hint="this is a bug in the pass; rerun with --debug for the traceback") from None
            if not isinstance(result, Pipeline):
                raise SpecirError(f"pass {p.name} returned {type(result).__name__}, not a Pipeline", location=where,
                                  hint="Pass.run must return the (new) pipeline")
            result = with_facts(result, set(facts_of(result)) | set(p.provides))
            try:
                now = declared_target.read(result)
            except SpecirError as exc:
                now = exc.message
            if now != declared:
                raise SpecirError(f"pass {p.name} changed the declared target (passes run before it: {before}): "
                                  f"{_describe(declared)} -> {_describe(now)}", location=where,
                                  hint="passes may rewrite the target's graph, never which checkpoint judges the "
                                       "pipeline (its model, source, digest or dtype)")
            try:
                verify(result)
            except SpecirError as exc:
                raise SpecirError(f"pass {p.name} produced invalid IR (passes run before it: {before}): "
                                  f"{exc.message}", location=exc.location, hint=exc.hint) from None
            self.records.append(PassRecord(p.name, p.spelled(), result != pipeline))
            pipeline = result
            done.append(p.spelled())
            if self.print_after_all:
                self.out(f"// ----- IR after {p.spelled()} -----\n{print_pipeline(pipeline)}")
        return pipeline
