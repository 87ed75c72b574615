"""`specir compile`: passes + lowering into an atomically written build folder.

The build folder holds `pipeline.spec` (the final IR), `manifest.json` (passes run, target,
facts, cost-model estimate, kernel list) and whatever the backend generated (kernel sources,
compiled modules). Weights the final IR declares `bf12` (pack-weights) are packed here, on the
GPU when there is one, into `weights/<model>.bf12.safetensors` (runtime/packed_weights.py),
listed under the manifest's `packed_weights`; the runtime loads them instead of packing.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path

from . import __version__
from .backends_api import lower
from .build_folder import atomic_build, check_output
from .cost_model import estimate
from .declared_target import read as read_declared
from .ir.nodes import Pipeline
from .ir.printer import print_pipeline
from .ir.verifier import require_step
from .load import load_pipeline, spec_folder
from .pass_infra import PassManager, build_passes, facts_of
from .runtime.derived_weights import write_derived_weights
from .runtime.packed_weights import write_packed_weights
from .runtime.weights import check_checkpoints
from .targets import get_target


def optimise(spec: "str | Path | Pipeline", pipeline_string: str = "", *, print_after_all: bool = False,
             debug: bool = False, target: str | None = None) -> tuple[Pipeline, PassManager]:
    """The passes run on `spec` (a .spec path, or a pipeline already loaded: passes never change
    their input, so a search loads its input once); `target`: the compile target the passes see
    (None: as under opt)."""
    pipeline = spec if isinstance(spec, Pipeline) else load_pipeline(spec)
    manager = PassManager(build_passes(pipeline_string) if pipeline_string else [],
                          print_after_all=print_after_all, debug=debug, target=target)
    return manager.run(pipeline), manager


def compile_pipeline(spec: str | Path, target_name: str, out: str | Path, pipeline_string: str = "",
                     *, print_after_all: bool = False, debug: bool = False, plugins=(), emit_ptx: bool = False) -> dict:
    """`plugins`: the --plugin files loaded for this compile; the manifest lists them so that run,
    check and bench load them again for the build (its IR may use their ops)."""
    target = get_target(target_name)
    check_output(Path(out))  # before the passes: a refused -o costs nothing
    source = load_pipeline(spec)
    declared = read_declared(source)  # recorded before any pass runs; the pass manager keeps it fixed
    manager = PassManager(build_passes(pipeline_string) if pipeline_string else [],
                          print_after_all=print_after_all, debug=debug, target=target.name)
    pipeline = manager.run(source)
    require_step(pipeline, "compiling")
    check_checkpoints(pipeline, spec_folder(spec))  # declared weights vs the safetensors headers, before lowering
    with atomic_build(Path(out)) as tmp:
        lowering = lower(pipeline, target, tmp, emit_ptx=emit_ptx)
        packed = write_packed_weights(lowering.pipeline, tmp, spec_folder(spec))
        derived = write_derived_weights(lowering.pipeline, tmp, spec_folder(spec))
        (tmp / "pipeline.spec").write_text(print_pipeline(lowering.pipeline))
        manifest = {
            "specir_version": __version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "source": str(spec),
            "declared_target": declared.as_dict() if declared else None,
            "target": target.name,
            "backend": lowering.backend,
            "pass_pipeline": ",".join(r.spelled for r in manager.records),
            "plugins": [str(Path(p).resolve()) for p in plugins],
            "passes": [{"name": r.name, "spelled": r.spelled, "changed": r.changed} for r in manager.records],
            "facts": list(facts_of(lowering.pipeline)),
            "cost_model": step_estimate(lowering.pipeline, target),
            "kernels": lowering.kernels,
            "packed_weights": packed,
            "derived_weights": derived,
            "files": sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()) + ["manifest.json"],
            "notes": lowering.notes + [f"packed weights of @{name}: {e['matrices']} matrices, {e['bits_per_weight']:.3f} "
                                       f"bits/weight, packed on {e['packed_on']} in {e['seconds']} s -> {e['file']}"
                                       for name, e in packed.items()]
                     + [f"token ids of @{name} ranked by {', '.join(sorted(set(e['weights'].values())))}, pinned -> "
                        f"{e['file']}" for name, e in derived.items()] + batch_notes(lowering.pipeline, target),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def step_estimate(pipeline: Pipeline, target) -> dict:
    """The cost model's step (cost_model.estimate) of the step as it runs: its AR pipeline's where a
    shrink table turns every draft op off from one live request on (`drafting_off` true then)."""
    from .batch_schedule import never_drafts
    if never_drafts(pipeline):
        from .runtime.baseline import ar_pipeline
        return {**estimate(ar_pipeline(pipeline, stock=False), target), "drafting_off": True}
    return estimate(pipeline, target)


def batch_notes(pipeline: Pipeline, target) -> list[str]:
    """A note where the cost model prices the step below plain decoding at a batch size (to two
    decimals), with, where the draft is verified whole at those sizes, the option that turns
    speculation down as the batch grows; or, where a shrink table turned every draft op off from
    one live request on, that the build decodes as plain AR does."""
    from .batch_schedule import never_drafts, slow_batches, verifier_of, verifies_whole_draft
    from .step.ops.common import has_recurrent_state
    if never_drafts(pipeline):
        return ["every draft op of this step is off from 1 live request (off_at = 1: batch-fusion's shrink table "
                "writes it where its cost model prices no draft above plain decoding at any batch size on the target "
                "it priced for), so this build decodes as its AR pipeline does; if the pair accepts more than the "
                "table assumes, give batch-fusion alpha=<measured per-token acceptance>, or try a cheaper draft "
                "(ngram-draft)"]
    try:
        slow = [(b, s) for b, s in slow_batches(pipeline, target) if round(s, 2) < 1.0]
        whole = bool(slow) and all(verifies_whole_draft(pipeline, b) for b, _ in slow)
        recurrent = bool(slow) and has_recurrent_state(pipeline.model(verifier_of(pipeline)))
    except Exception:  # noqa: BLE001 - advisory: a step the roofline cannot price (e.g. a plugin op) gets no note
        return []
    if not slow:
        return []
    where = ", ".join(f"{b} ({s:.2f}x)" for b, s in slow)
    note = (f"the cost model ({target.name} roofline, per-token acceptance 0.7 assumed) prices this step below "
            f"plain decoding at batch {where}")
    if not whole or recurrent:  # (batch-fusion packs one row per token: not for recurrent targets)
        return [note]
    fix = (f"give batch-fusion shrink=true,target={target.name}" if "batch-fusion" in facts_of(pipeline)
           else "add batch-fusion (its shrink table, on by default, is priced for the compile target)")
    return [f"{note}: each request verifies its whole draft at every batch size; {fix} to draft less as the "
            f"batch grows and not at all where it does not pay"]
