"""Loading the weights a model region declares, memory-mapped from its safetensors files.

Contract: returns name -> tensor on `device`, in the checkpoint's dtype (casting is the
runner's business), for exactly the weights the IR declares; a weight the IR declares but the
files lack (or with another shape) is a SpecirError naming it.
A weight the IR declares `bf12` (pack-weights) is a `specir.bf12.BF12Matrix` on `device`: read
from the build folder's packed weights when `build` holds them (runtime/packed_weights.py), else
packed here, at load time, from the bf16 checkpoint tensor (on `device`). A derived weight
(`ranked_by`: draft-vocab{order=frequency}'s token ids) is read from the build, where `specir compile`
pinned it (runtime/derived_weights.py), else computed (checkpoint_tensors.derived_weight).
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..bf12 import pack
from ..importers.checkpoint import tensor_index
from ..ir.nodes import Model
from .checkpoint_tensors import (check_checkpoints, check_declared, derived_weight, is_derived,  # noqa: F401
                                 iter_tensors, model_folder, stored_as)
from .derived_weights import read_derived_weights
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
    derived = read_derived_weights(model, build) or \
        {w.name: derived_weight(model, w, folder, base) for w in model.weights if is_derived(w)}
    readers: dict[str, list[str]] = {}  # checkpoint tensor -> declared names reading it
    for name in (n for n in names if n not in out and n not in derived):
        readers.setdefault(stored_as(model.weight(name)), []).append(name)
    for source, tensor in iter_tensors(list(readers), index):  # one tensor in memory at a time
        for name in readers[source]:
            part = _rows(model.weight(name), tensor, derived)
            out[name] = pack(part.to(device)) if name in packed else part.to(device)
    out.update({n: t.to(device) for n, t in derived.items() if n in names})
    return out


def _rows(w, tensor: torch.Tensor, derived: dict) -> torch.Tensor:
    """The declared weight's part of its checkpoint tensor: all of it, its first rows (`rows_of`), or
    the rows at the ids of the derived weight `row_ids` names; a copy, not a view keeping the whole."""
    if "rows_of" not in w.attrs:
        return tensor
    if "row_ids" in w.attrs:
        return tensor.index_select(0, derived[str(w.attrs["row_ids"])].long())
    return tensor[: w.type.shape[0]].clone()
