"""Opening what `run`, `check` and `bench` were given: a build folder, or a .spec compiled on the
fly for a target; and building the engine of the backend it was lowered for."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ..build_folder import is_build_folder, read_manifest
from ..compiler import optimise
from ..declared_target import final_verify
from ..errors import SpecirError
from ..ir.nodes import Pipeline
from ..ir.verifier import require_step
from ..load import load_pipeline, spec_folder
from ..pipeline_template import default_spec_text
from ..targets import Target, get_target, host_target, require_available
from ..step.engine import StepEngine
from .packed_weights import FOLDER as PACKED_FOLDER
from .weights import check_checkpoints, load_weights, model_folder


@dataclass
class Session:
    pipeline: Pipeline
    target: Target
    backend: str
    build: Path | None
    base: Path | None

    @property
    def device(self) -> str:
        import torch
        return "cuda" if self.target.kind == "gpu" and torch.cuda.is_available() else "cpu"

    def target_folder(self) -> Path:
        engine_target = _target_model(self.pipeline)
        return model_folder(engine_target, self.base)

    def engine(self, **kwargs) -> StepEngine:
        return make_engine(self.pipeline, self.backend, self.device, self.build, base=self.base, **kwargs)


def _target_model(pipeline: Pipeline):
    require_step(pipeline, "running")
    verify = final_verify(pipeline)
    if verify is None:
        raise SpecirError("the step verifies nothing", hint="a step needs a verify op on the target")
    return pipeline.model(verify.symbols[0])


def open_session(source: str | None, target: str | None = None, passes: str = "") -> Session:
    """`source`: a build folder, a .spec file, or None for the shipped default pair."""
    if source is None:
        pipeline = load_pipeline("<default>", text=default_spec_text())
        tgt = get_target(target or host_target())
        require_available(tgt)
        return Session(pipeline, tgt, _backend_for(tgt), None, None)
    path = Path(source)
    if path.is_dir():
        if not is_build_folder(path):
            raise SpecirError(f"{source} is a folder but not a specir build (no manifest.json / pipeline.spec)",
                              path=source, hint="give a .spec file or a folder written by specir compile")
        manifest = read_manifest(path)
        from ..pass_infra import load_plugin
        for plugin in manifest.get("plugins") or []:
            load_plugin(plugin)  # the build's IR may use the step ops its plugins define
        if target and target != manifest["target"]:
            raise SpecirError(f"{source} was compiled for {manifest['target']}, not {target}", path=source,
                              hint=f"recompile with --target {target}, or drop --target")
        tgt = get_target(manifest["target"])
        require_available(tgt)
        spec_source = manifest.get("source")
        base = spec_folder(spec_source)
        pipeline = load_pipeline(path / "pipeline.spec")
        require_step(pipeline, "running")
        check_checkpoints(pipeline, base)  # headers vs declarations, before any kernel is compiled
        return Session(pipeline, tgt, manifest["backend"], path, base)
    tgt = get_target(target or host_target())
    require_available(tgt)
    pipeline, _ = optimise(path, passes, target=tgt.name)
    require_step(pipeline, "running")
    check_checkpoints(pipeline, path.parent)
    return Session(pipeline, tgt, _backend_for(tgt), None, path.parent)


def _backend_for(target: Target) -> str:
    """The backend that executes on `target` today (falls back to reference where the target's
    own backend is not available on this machine)."""
    from ..backends_api import backend_module
    try:
        module = backend_module(target.backend)
    except SpecirError:
        return "reference"
    if not hasattr(module, "step_backend"):
        return "reference"
    missing = getattr(module, "unavailable_reason", lambda: None)()
    if missing:  # e.g. tvm not installed: say so in one line and run on torch
        print(f"note: {target.backend} backend unavailable ({missing}); running on the reference backend",
              file=sys.stderr)
        return "reference"
    if target.kind == "gpu":
        import torch
        from ..targets import interpreting_triton
        if not torch.cuda.is_available() and not interpreting_triton():
            return "reference"
    return target.backend


def make_engine(pipeline: Pipeline, backend: str, device: str, build: Path | None, *, weights: dict | None = None,
                base: Path | None = None) -> StepEngine:
    """The warm engine of `pipeline` on `backend` (its module's `step_backend(pipeline, device, build)`:
    the executors of its model regions and its lowerings of step ops). A build holding packed weights
    (compile after pack-weights) hands them to the engine loaded; `weights` (model name -> tensors)
    replaces loading from the checkpoints."""
    from ..backends_api import backend_module
    module = backend_module(backend)
    step_backend = module.step_backend(pipeline, device, build)
    if build is not None and weights is None and has_packed_weights(build):
        weights = build_weights(pipeline, device, build)
    return StepEngine(pipeline, step_backend, weights=weights, base=base, build=build)


def has_packed_weights(build: Path) -> bool:
    return (Path(build) / PACKED_FOLDER).is_dir()


def build_weights(pipeline: Pipeline, device: str, build: Path) -> dict:
    """Weights of the models the step uses, packed ones read from the build folder."""
    used = {s.lstrip("@") for op in pipeline.step.ops for s in op.symbols}
    return {m.name: load_weights(m, device, build=build) for m in pipeline.models if m.name in used}
