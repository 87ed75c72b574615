"""Loading a pipeline: parse, expand `import(...)` models, infer types, verify."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .declared_target import declare
from .importers import import_model, resolve_source
from .ir.nodes import Pipeline
from .ir.parser import parse, parse_file
from .ir.verifier import infer_types


def spec_folder(source: str | Path | None) -> Path | None:
    """The folder relative model sources (and draft-vocab corpora) of a .spec at `source` are relative
    to; None for a pipeline given as text ("<...>")."""
    return None if not source or str(source).startswith("<") else Path(source).parent


def expand_imports(pipeline: Pipeline) -> Pipeline:
    """Replace every `model @m = import("dir")` by the imported graph (attributes kept on top)."""
    base = Path(pipeline.source_file).parent if pipeline.source_file and not pipeline.source_file.startswith("<") \
        else Path.cwd()
    models = []
    for m in pipeline.models:
        if m.is_import:
            source = m.import_path if m.import_path.startswith("zoo:") else \
                str(resolve_source(m.import_path, base, m.loc).resolve())
            imported = import_model(m.name, source, base=base, where=m.loc)
            merged = dict(imported.attrs.items())
            merged.update(m.attrs.items())
            m = replace(imported, attrs=type(imported.attrs)(merged), loc=m.loc)
        models.append(m)
    return replace(pipeline, models=tuple(models))


def load_pipeline(source: str | Path, *, text: str | None = None) -> Pipeline:
    """A verified, fully typed pipeline from a .spec file (or from `text`), its declared target filled
    in (or checked against the checkpoint on disk)."""
    pipeline = parse(text, str(source)) if text is not None else parse_file(source)
    return infer_types(declare(expand_imports(pipeline)))
