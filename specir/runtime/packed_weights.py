"""Packed (BF12) weights of a build folder: written by `specir compile`, read by the runtime.

Contract:
- `write_packed_weights(pipeline, build, base)` packs every `bf12` weight of every model (read
  bf16 from the model's `source`, packed on the GPU when there is one, else on the CPU) into
  `build/weights/<model>.bf12.safetensors` (the naming of specir.bf12.serialize) and returns the
  manifest entry `{model: {"file", "matrices", "bits_per_weight", "packed_on", "seconds"}}`.
  The file's header records the checkpoint files the matrices came from (path, size, mtime).
- `read_packed_weights(model, build, folder, device)` returns the model's BF12 matrices from the
  build, on `device`, or {} when the build has none for it. If the checkpoint files changed since
  compile, it says so on stderr and returns {} (load_weights then packs at load time).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from ..bf12 import BF12Matrix, bits_per_weight, load, pack, to_tensors
from ..errors import SpecirError
from ..importers.checkpoint import tensor_index
from ..ir.nodes import Model, Pipeline
from .checkpoint_tensors import check_declared, iter_tensors, model_folder

FOLDER = "weights"
SOURCES_KEY = "specir.sources"


def packed_file(build: Path, model_name: str) -> Path:
    return Path(build) / FOLDER / f"{model_name}.bf12.safetensors"


def packed_names(model: Model) -> list[str]:
    """The bf12 weights a build stores packed (a `rows_of` weight, draft-vocab's narrowed head, is
    packed at load time from its rows instead)."""
    return [w.name for w in model.weights if w.type.dtype == "bf12" and "rows_of" not in w.attrs]


def pack_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def fingerprint(files) -> dict[str, list[int]]:
    """{absolute path: [size, mtime_ns]} of checkpoint files."""
    out = {}
    for f in sorted({Path(f).resolve() for f in files}):
        st = f.stat()
        out[str(f)] = [st.st_size, st.st_mtime_ns]
    return out


def write_packed_weights(pipeline: Pipeline, build: Path, base: Path | None) -> dict:
    from safetensors.torch import save_file

    entries = {}
    device = pack_device()
    for model in pipeline.models:
        names = packed_names(model) if model.graph is not None else []
        if not names:
            continue
        start = time.perf_counter()
        folder = model_folder(model, base)
        index = tensor_index(folder, model.loc)
        check_declared(model, names, index, folder)
        tensors, metadata, weights, bits = {}, {}, 0, 0.0
        for name, w in iter_tensors(names, index):
            matrix = pack(w.to(device))
            t, m = to_tensors(name, matrix)  # on the CPU
            tensors.update(t)
            metadata.update(m)
            weights += w.numel()
            bits += bits_per_weight(matrix) * w.numel()
            del matrix, w
        metadata[SOURCES_KEY] = json.dumps(fingerprint(index[n].file for n in names), sort_keys=True)
        path = packed_file(build, model.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            save_file(tensors, str(path), metadata=metadata)
        except OSError as exc:
            raise SpecirError(f"cannot write packed weights: {exc.strerror}", path=str(path),
                              hint="is the disk full? choose another -o") from None
        del tensors
        entries[model.name] = {"file": str(path.relative_to(build)), "matrices": len(names),
                               "bits_per_weight": round(bits / weights, 4), "packed_on": device.type,
                               "seconds": round(time.perf_counter() - start, 2)}
    return entries


def read_packed_weights(model: Model, build: Path | None, folder: Path, device) -> dict[str, BF12Matrix]:
    if build is None:
        return {}
    path = packed_file(build, model.name)
    if not path.is_file():
        return {}
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(str(path), framework="pt") as f:
            recorded = json.loads((f.metadata() or {}).get(SOURCES_KEY, "{}"))
    except (OSError, SafetensorError, json.JSONDecodeError) as exc:
        raise SpecirError(f"cannot read packed weights: {exc}", path=str(path),
                          hint="the build folder is damaged: recompile it") from None
    index = tensor_index(folder, model.loc)
    names = set(packed_names(model))
    if recorded != fingerprint(index[n].file for n in names if n in index):
        print(f"specir: note: {path} was packed from other checkpoint files than {folder} holds now; "
              f"packing @{model.name}'s weights at load time instead (recompile to store them again)",
              file=sys.stderr)
        return {}
    return {n: m for n, m in load(path, device=device).items() if n in names}
