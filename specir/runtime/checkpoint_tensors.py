"""A model region's checkpoint tensors: its folder, the check that the files hold every weight the
IR declares (name, shape, dtype), and memory-mapped iteration over them.

Contract: `model_folder(model, base)` resolves the region's `source`; `check_declared` raises a
located SpecirError naming the first missing or mismatched weight; `iter_tensors` yields
(name, tensor) in the checkpoint's dtype on the CPU. A weight with a `rows_of` attribute is the
first rows of another checkpoint tensor (its declared shape[0] of them; draft-vocab's drafter
head), or with `row_ids` too the rows at the token ids that weight names: `stored_as` names the
tensor to read, and `check_declared` checks it against that tensor. A weight with `ranked_by` is
derived, not read (`derived_weight`: draft-vocab{order=frequency}'s kept ids).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import torch
from safetensors import safe_open

from ..errors import SpecirError
from ..importers import resolve_source
from ..importers.checkpoint import TensorInfo, tensor_index
from ..ir.nodes import Model


def model_folder(model: Model, base: Path | None = None) -> Path:
    source = model.attrs.get("source")
    if not source:
        raise SpecirError(f"model @{model.name} has no `source` attribute naming its checkpoint",
                          location=model.loc, hint='add attributes {source = "path/to/checkpoint"}')
    return resolve_source(source, base)


def stored_as(w) -> str:
    """The checkpoint tensor a declared weight reads: its own name, or the one whose rows it is."""
    return str(w.attrs.get("rows_of", w.name))


def is_derived(w) -> bool:
    """Whether a declared weight is computed at load instead of read (draft-vocab's ranked token ids:
    `ranked_by`), so no checkpoint holds it."""
    return "ranked_by" in w.attrs


def ranking_corpus(w, base: Path | None) -> str:
    """A derived weight's corpus: "stdlib", or its path (a relative one is relative to the .spec's folder,
    as model sources are)."""
    corpus = str(w.attrs["ranked_by"])
    if corpus == "stdlib" or base is None or Path(corpus).expanduser().is_absolute():
        return corpus
    return str(Path(base) / corpus)


def derived_weight(model: Model, w, folder: Path, base: Path | None = None) -> torch.Tensor:
    """The value of a derived weight: `ranked_by = CORPUS`, `vocab = V` -> the first N (its length) of
    token ids 0..V-1 ranked by frequency in CORPUS (specir/token_ranking.py) under the tokenizer of the
    checkpoint `folder`, int32."""
    from ..token_ranking import ranked_ids
    n, vocab = w.type.shape[0], int(w.attrs.get("vocab", 0))
    if not 0 < n <= vocab:
        raise SpecirError(f"weight {w.name!r} keeps {n} ids of a vocabulary of {vocab}", location=w.loc or model.loc,
                          hint="draft-vocab's size must be below the drafter's vocabulary")
    _check_ranking_inputs(model, w, folder, base)
    return torch.tensor(ranked_ids(str(folder), vocab, ranking_corpus(w, base))[:n], dtype=torch.int32)


def _check_ranking_inputs(model: Model, w, folder: Path, base: Path | None) -> None:
    """The tokenizer and corpus a derived weight needs exist (a located error with draft-vocab's hint)."""
    if not ((folder / "tokenizer.json").is_file() or (folder / "tokenizer.model").is_file()):
        raise SpecirError(f"weight {w.name!r} of @{model.name} ranks token ids with the checkpoint's tokenizer, and "
                          f"{folder} has none", path=str(folder), location=w.loc or model.loc,
                          hint="add the tokenizer files to the checkpoint, or use draft-vocab{order=id}")
    corpus = ranking_corpus(w, base)
    if corpus != "stdlib" and not Path(corpus).expanduser().exists():
        raise SpecirError(f"the ranking corpus {corpus!r} of weight {w.name!r} does not exist", path=corpus,
                          location=w.loc or model.loc,
                          hint='a relative corpus is relative to the .spec\'s folder; or use corpus="stdlib"')


def check_declared(model: Model, names: list[str], index: dict[str, TensorInfo], folder: Path) -> None:
    """Every name is in the checkpoint with the declared shape (bf12 weights: stored as bf16; a
    `rows_of` weight: at most as many rows as its tensor, the other dimensions equal)."""
    for name in names:
        w = model.weight(name)
        if is_derived(w):  # computed, not read: checked where it is derived (compile pins it)
            continue
        info = index.get(stored_as(w))
        if info is not None and "rows_of" in w.attrs:
            shape = tuple(w.type.shape)
            if len(info.shape) != len(shape) or info.shape[1:] != shape[1:] or not 0 < shape[0] <= info.shape[0]:
                raise SpecirError(f"weight {name!r} ({shape[0]} rows of {stored_as(w)!r}) does not fit "
                                  f"its tensor's shape {list(info.shape)} on disk", path=str(info.file),
                                  location=w.loc or model.loc, hint="run the passes again on this checkpoint")
            info = replace(info, shape=shape)
        if info is None:
            raise SpecirError(f"weight {name!r} of @{model.name} is missing from {folder}", path=str(folder),
                              hint="the checkpoint changed since the pipeline was written: re-run specir init "
                                   "or restore the files")
        if info.shape != tuple(w.type.shape):
            raise SpecirError(f"weight {name!r} has shape {list(info.shape)} on disk, the pipeline says "
                              f"{list(w.type.shape)}", path=str(info.file), hint="re-run specir init for this checkpoint")
        if w.type.dtype == "bf12" and info.dtype != "bf16":
            raise SpecirError(f"weight {name!r} is {info.dtype} on disk, but the pipeline packs it as bf12 "
                              f"(lossless only for bf16)", path=str(info.file),
                              hint="the checkpoint changed since pack-weights ran: run the passes again")
        if w.type.dtype != "bf12" and info.dtype != w.type.dtype:
            raise SpecirError(f"weight {name!r} of @{model.name} is declared {w.type}, but {info.file.name} holds "
                              f"it as {info.dtype}", location=w.loc or model.loc, path=str(info.file),
                              hint=f"declare it {info.dtype}{list(w.type.shape)} (the activation dtype is the model's "
                                   f"`dtype` attribute), or re-run specir init for this checkpoint")


def check_checkpoints(pipeline, base: Path | None = None) -> None:
    """Every weight that the models the step uses declare is in its checkpoint with the declared
    shape and dtype, and the safetensors files are whole (headers only; no tensor is read)."""
    used = {s.lstrip("@") for op in pipeline.step.ops for s in op.symbols} if pipeline.step else set()
    for model in pipeline.models:
        if model.name not in used or model.graph is None or not model.attrs.get("source"):
            continue
        folder = model_folder(model, base)
        index = tensor_index(folder, model.loc)
        check_declared(model, [w.name for w in model.weights], index, folder)


def iter_tensors(names: list[str], index: dict[str, TensorInfo]) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, CPU tensor) one at a time, each file opened once (memory-mapped)."""
    by_file: dict[Path, list[str]] = {}
    for name in names:
        by_file.setdefault(index[name].file, []).append(name)
    for file, group in by_file.items():
        try:
            with safe_open(str(file), framework="pt", device="cpu") as f:
                for name in group:
                    yield name, f.get_tensor(name)
        except (OSError, RuntimeError, ValueError) as exc:
            raise SpecirError(f"cannot read weights from {file.name}: {exc}", path=str(file),
                              hint="the file is truncated or corrupt") from None
