"""The declared target of what is being checked, read without importing any plugin.

- a build folder: the manifest's `declared_target` (recorded by compile before any pass ran); when
  the .spec it was compiled from is still there, that file must declare the same target;
- a .spec file (or the shipped default): parsed, its models imported, and its declaration read or
  filled in exactly as `load_pipeline` does, but without verifying ops (a .spec may use ops that
  only a plugin defines; then it must declare its target explicitly).
Either way the checkpoint's digest is checked against the files on disk.
"""
from __future__ import annotations

from pathlib import Path

from ..build_folder import is_build_folder, read_manifest
from ..declared_target import DeclaredTarget, declare, read
from ..errors import SpecirError
from ..ir.opdefs import OPS
from ..ir.parser import parse, parse_file
from ..load import expand_imports


def declared_of_spec(spec: str | Path | None, text: str | None = None) -> DeclaredTarget:
    pipeline = parse(text, str(spec)) if text is not None else parse_file(spec)
    pipeline = expand_imports(pipeline)
    if read(pipeline) is None and pipeline.step is not None:
        unknown = sorted({op.name for op in pipeline.step.ops if op.name not in OPS})
        if unknown:
            raise SpecirError(f"{spec} uses step ops that no built-in definition has ({', '.join(unknown)}) and "
                              f"declares no target, so the judge cannot tell which model it serves",
                              path=str(spec), hint="declare it: pipeline NAME attributes {target = {model = @target, "
                                                   "source = ..., digest = ..., dtype = ...}} (specir init writes it)")
    declared = read(declare(pipeline))
    if declared is None:
        raise SpecirError(f"{spec} verifies nothing, so it has no target to check against", path=str(spec),
                          hint="a step needs a verify op on the target")
    return declared


def declared_of_build(build: Path) -> DeclaredTarget:
    manifest = read_manifest(build)
    if not manifest.get("declared_target"):
        raise SpecirError(f"{build} records no declared target (it was compiled by an older specir)", path=str(build),
                          hint="recompile it with specir compile")
    declared = DeclaredTarget.from_dict(manifest["declared_target"], f"{build}/manifest.json")
    source = manifest.get("source")
    if source and not str(source).startswith("<") and Path(source).is_file():
        try:
            from_source = declared_of_spec(source)
        except SpecirError:
            from_source = None  # the source changed too much to read; the manifest's record stands
        if from_source is not None and from_source != declared:
            raise SpecirError(f"{build} was compiled against @{declared.model} = {declared.source}, but its source "
                              f"{source} now declares @{from_source.model} = {from_source.source} "
                              f"({from_source.digest[:19]}...)", path=str(build),
                              hint="recompile the build from its source")
    # the checkpoint must still be the one declared
    declare(_stub_pipeline(declared))
    return declared


def declared_of(source: str | None, default_text: str) -> DeclaredTarget:
    """The declared target of a build folder, a .spec file, or (None) the shipped default pipeline."""
    if source is None:
        return declared_of_spec("<default>", default_text)
    path = Path(source)
    if path.is_dir() and is_build_folder(path):
        return declared_of_build(path)
    if path.is_dir():
        raise SpecirError(f"{source} is a folder but not a specir build (no manifest.json / pipeline.spec)",
                          path=source, hint="give a .spec file or a folder written by specir compile")
    return declared_of_spec(path)


def _stub_pipeline(declared: DeclaredTarget):
    """A pipeline holding only the declaration and its model's name, for `declare`'s digest check."""
    from ..ir.nodes import Attrs, Model, Pipeline
    model = Model(declared.model, Attrs({"source": declared.source}))
    return Pipeline("check", Attrs({"target": declared.as_attrs()}), (model,))
