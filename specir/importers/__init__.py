"""Checkpoint importers: a Hugging Face folder -> a model region of the IR."""
from __future__ import annotations

from pathlib import Path

from ..errors import SourceLocation, SpecirError
from ..ir.nodes import Model
from .checkpoint import read_config, tensor_index
from .gated_deltanet import MODEL_TYPES as GATED_DELTANET_TYPES, build_gated_deltanet
from .llama import MODEL_TYPES, build_llama
from .mamba2_hybrid import MODEL_TYPES as MAMBA2_TYPES, build_mamba2_hybrid

IMPORTERS = {t: build_llama for t in MODEL_TYPES}
IMPORTERS.update({t: build_gated_deltanet for t in GATED_DELTANET_TYPES})
IMPORTERS.update({t: build_mamba2_hybrid for t in MAMBA2_TYPES})


def resolve_source(path: str, base: Path | None = None, where: SourceLocation | None = None) -> Path:
    """`zoo:NAME` -> the shipped zoo folder; relative paths are relative to `base` (the .spec's folder)."""
    if path.startswith("zoo:"):
        from ..zoo.paths import zoo_model_dir
        return zoo_model_dir(path[4:], where)
    if not path.strip():
        raise SpecirError("the checkpoint path is empty", location=where,
                          hint='import("path/to/checkpoint") names a Hugging Face folder, or zoo:NAME')
    p = Path(path).expanduser()
    if not p.is_absolute() and base is not None:
        p = base / p
    return p


def import_model(name: str, source: str, *, base: Path | None = None,
                 where: SourceLocation | None = None) -> Model:
    """Expand `model @name = import(source)` into a full model region."""
    folder = resolve_source(source, base, where)
    config = read_config(folder, where)
    model_type = config.get("model_type")
    build = IMPORTERS.get(model_type) if isinstance(model_type, str) else None
    if build is None:
        raise SpecirError(f"model_type {model_type!r} is not supported", location=where,
                          path=str(folder / "config.json"),
                          hint="supported: " + ", ".join(sorted(IMPORTERS)))
    return build(config, tensor_index(folder, where), name=name, source=source, where=where,
                 config_path=str(folder / "config.json"))
