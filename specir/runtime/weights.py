"""Loading the weights a model region declares, memory-mapped from its safetensors files.

Contract: returns name -> tensor on `device`, in the checkpoint's dtype (casting is the
runner's business), for exactly the weights the IR declares; a weight the IR declares but the
files lack (or with another shape) is a SpecirError naming it.
"""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open

from ..errors import SpecirError
from ..importers import resolve_source
from ..importers.checkpoint import tensor_index
from ..ir.nodes import Model


def model_folder(model: Model, base: Path | None = None) -> Path:
    source = model.attrs.get("source")
    if not source:
        raise SpecirError(f"model @{model.name} has no `source` attribute naming its checkpoint",
                          location=model.loc, hint='add attributes {source = "path/to/checkpoint"}')
    return resolve_source(source, base)


def load_weights(model: Model, device: str | torch.device = "cpu", base: Path | None = None,
                 skip: set[str] | None = None) -> dict[str, torch.Tensor]:
    folder = model_folder(model, base)
    index = tensor_index(folder, model.loc)
    by_file: dict[Path, list] = {}
    for w in model.weights:
        if skip and w.name in skip:
            continue
        info = index.get(w.name)
        if info is None:
            raise SpecirError(f"weight {w.name!r} of @{model.name} is missing from {folder}", path=str(folder),
                              hint="the checkpoint changed since the pipeline was written: re-run specir init "
                                   "or restore the files")
        want = tuple(w.type.shape)
        if w.type.dtype != "bf12" and info.shape != want:
            raise SpecirError(f"weight {w.name!r} has shape {list(info.shape)} on disk, the pipeline says "
                              f"{list(want)}", path=str(info.file), hint="re-run specir init for this checkpoint")
        by_file.setdefault(info.file, []).append(w.name)
    out = {}
    for file, names in by_file.items():
        try:
            with safe_open(str(file), framework="pt", device="cpu") as f:
                for name in names:
                    out[name] = f.get_tensor(name).to(device)
        except (OSError, RuntimeError, ValueError) as exc:
            raise SpecirError(f"cannot read weights from {file.name}: {exc}", path=str(file),
                              hint="the file is truncated or corrupt") from None
    return out
