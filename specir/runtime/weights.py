"""Loading the weights a model region declares, memory-mapped from its safetensors files.

Contract: returns name -> tensor on `device`, in the checkpoint's dtype (casting is the
runner's business), for exactly the weights the IR declares; a weight the IR declares but the
files lack (or with another shape) is a SpecirError naming it.
A weight the IR declares `bf12` (pack-weights) is a `specir.bf12.BF12Matrix` on `device`: read
from the build folder's packed weights when `build` holds them (runtime/packed_weights.py), else
packed here, at load time, from the bf16 checkpoint tensor (on `device`).
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..bf12 import pack
from ..importers.checkpoint import tensor_index
from ..ir.nodes import Model
from .checkpoint_tensors import (check_checkpoints, check_declared, iter_tensors, model_folder,  # noqa: F401
                                 stored_as)
from .packed_weights import read_packed_weights


def load_weights(model: Model, device: str | torch.device = "cpu", base: Path | None = None,
                 skip: set[str] | None = None, build: Path | None = None) -> dict:
    folder = model_folder(model, base)
    index = tensor_index(folder, model.loc)
    names = [w.name for w in model.weights if not (skip and w.name in skip)]
    check_declared(model, names, index, folder)
    packed = {w.name for w in model.weights if w.type.dtype == "bf12" and w.name in names}
    out = {n: m for n, m in read_packed_weights(model, build, folder, device).items() if n in packed} \
        if packed else {}
    readers: dict[str, list[tuple[str, int | None]]] = {}  # checkpoint tensor -> (declared name, rows)
    for name in (n for n in names if n not in out):
        w = model.weight(name)
        readers.setdefault(stored_as(w), []).append((name, w.type.shape[0] if "rows_of" in w.attrs else None))
    for source, tensor in iter_tensors(list(readers), index):  # one tensor in memory at a time
        for name, rows in readers[source]:
            part = tensor if rows is None else tensor[:rows].clone()  # not a view keeping the whole tensor
            out[name] = pack(part.to(device)) if name in packed else part.to(device)
    return out
