"""`specir compile`: passes + lowering into an atomically written build folder.

The build folder holds `pipeline.spec` (the final IR), `manifest.json` (passes run, target,
facts, cost-model estimate, kernel list) and whatever the backend generated (kernel sources,
packed weights, compiled modules).
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path

from . import __version__
from .backends_api import lower
from .build_folder import atomic_build
from .cost_model import estimate
from .ir.nodes import Pipeline
from .ir.printer import print_pipeline
from .load import load_pipeline
from .pass_manager import PassManager, facts_of
from .pass_pipeline import build_passes
from .targets import get_target


def optimise(spec: str | Path, pipeline_string: str = "", *, print_after_all: bool = False,
             debug: bool = False) -> tuple[Pipeline, PassManager]:
    pipeline = load_pipeline(spec)
    manager = PassManager(build_passes(pipeline_string) if pipeline_string else [],
                          print_after_all=print_after_all, debug=debug)
    return manager.run(pipeline), manager


def compile_pipeline(spec: str | Path, target_name: str, out: str | Path, pipeline_string: str = "",
                     *, print_after_all: bool = False, debug: bool = False) -> dict:
    target = get_target(target_name)
    pipeline, manager = optimise(spec, pipeline_string, print_after_all=print_after_all, debug=debug)
    with atomic_build(Path(out)) as tmp:
        lowering = lower(pipeline, target, tmp)
        (tmp / "pipeline.spec").write_text(print_pipeline(lowering.pipeline))
        manifest = {
            "specir_version": __version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "source": str(spec),
            "target": target.name,
            "backend": lowering.backend,
            "pass_pipeline": ",".join(r.spelled for r in manager.records),
            "passes": [{"name": r.name, "spelled": r.spelled, "changed": r.changed} for r in manager.records],
            "facts": list(facts_of(lowering.pipeline)),
            "cost_model": estimate(lowering.pipeline, target),
            "kernels": lowering.kernels,
            "files": sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()) + ["manifest.json"],
            "notes": lowering.notes,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
