"""The backend interface: lowering a pipeline for a target into a build folder, and picking the
executor that runs a build. Backends live in specir.backends.<name> (one folder each) and expose
`lower(pipeline, target, folder) -> Lowering`."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SpecirError
from .ir.nodes import Pipeline
from .targets import Target


@dataclass
class Lowering:
    backend: str
    pipeline: Pipeline
    kernels: list[dict] = field(default_factory=list)  # {"op", "kernel", "source"?, "config"?}
    notes: list[str] = field(default_factory=list)


def backend_module(name: str):
    try:
        module = importlib.import_module(f"specir.backends.{name}.lowering")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("specir.backends"):
            raise SpecirError(f"backend {name!r} is not available", hint="backends: reference, triton, tvm") from None
        raise SpecirError(f"backend {name!r} needs the package {exc.name!r}, which is not installed",
                          hint=f"pip install {exc.name}") from None
    return module


def attention_scores(name: str) -> bool:
    """Whether backend `name`'s attention materialises its scores (its lowering's ATTENTION_SCORES)."""
    return bool(getattr(backend_module(name), "ATTENTION_SCORES", True))


def kernel_table(name: str = "reference") -> dict:
    """The model-graph kernel table {op name: fn(params, state, *inputs)} of backend `name`
    (specir.backends.<name>.ops.KERNELS). Core code reaches backend kernels only through here."""
    try:
        module = importlib.import_module(f"specir.backends.{name}.ops")
    except ModuleNotFoundError as exc:
        raise SpecirError(f"backend {name!r} has no kernel table ({exc.name} is missing)",
                          hint="backends with kernel tables: reference") from None
    return module.KERNELS


def lower(pipeline: Pipeline, target: Target, folder: Path, **options) -> Lowering:
    """Lower with the target's backend; where that backend cannot lower yet, fall back to the
    reference backend and say so in the manifest notes. `options` (e.g. emit_ptx) go to backends
    that take them."""
    try:
        module = backend_module(target.backend)
    except SpecirError as exc:
        if target.backend == "reference":
            raise
        lowering = backend_module("reference").lower(pipeline, target, folder)
        lowering.notes.append(f"{target.backend} backend unavailable ({exc.message}); lowered to reference")
        return lowering
    import inspect
    accepted = inspect.signature(module.lower).parameters
    return module.lower(pipeline, target, folder, **{k: v for k, v in options.items() if k in accepted})
