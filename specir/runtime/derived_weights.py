"""Derived weights of a build folder (draft-vocab{order=frequency}'s ranked token ids): pinned by
`specir compile`, read by the runtime, so a build drafts from the ids it was compiled with whatever
happens to the corpus or the Python standard library afterwards.

Contract:
- `write_derived_weights(pipeline, build, base)` computes every derived weight of every model
  (checkpoint_tensors.derived_weight: the model's tokenizer over the corpus its IR names, a relative
  corpus relative to `base`, the .spec's folder) into `build/weights/<model>.derived.safetensors`
  and returns the manifest entry `{model: {"file", "weights": {name: corpus}}}`. A missing tokenizer
  or corpus fails the compile with a located error.
- `read_derived_weights(model, build)` returns the model's derived weights from the build (CPU
  tensors), or {} when the build has none for it (a .spec run derives them at load).
"""
from __future__ import annotations

from pathlib import Path

from ..errors import SpecirError
from ..ir.nodes import Model, Pipeline
from .checkpoint_tensors import derived_weight, is_derived, model_folder, ranking_corpus
from .packed_weights import FOLDER  # the build's weight files live together


def derived_file(build: Path, model_name: str) -> Path:
    return Path(build) / FOLDER / f"{model_name}.derived.safetensors"


def write_derived_weights(pipeline: Pipeline, build: Path, base: Path | None) -> dict:
    from safetensors.torch import save_file

    entries = {}
    for model in pipeline.models:
        derived = [w for w in model.weights if is_derived(w)] if model.graph is not None else []
        if not derived:
            continue
        folder = model_folder(model, base)
        tensors = {w.name: derived_weight(model, w, folder, base) for w in derived}
        corpora = {w.name: ranking_corpus(w, base) for w in derived}
        path = derived_file(build, model.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            save_file(tensors, str(path), metadata={f"corpus:{n}": c for n, c in corpora.items()})
        except OSError as exc:
            raise SpecirError(f"cannot write derived weights: {exc.strerror}", path=str(path),
                              hint="is the disk full? choose another -o") from None
        entries[model.name] = {"file": str(path.relative_to(build)), "weights": corpora}
    return entries


def read_derived_weights(model: Model, build: Path | None) -> dict:
    if build is None or not derived_file(build, model.name).is_file():
        return {}
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    path = derived_file(build, model.name)
    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise SpecirError(f"cannot read derived weights: {exc}", path=str(path),
                          hint="the build folder is damaged: recompile it") from None
    names = [w.name for w in model.weights if is_derived(w)]
    if any(n not in tensors or tuple(tensors[n].shape) != tuple(model.weight(n).type.shape) for n in names):
        raise SpecirError(f"{path} does not hold @{model.name}'s derived weights as its IR declares them", path=str(path),
                          hint="the build folder is damaged or was edited: recompile it")
    return {n: tensors[n] for n in names}
