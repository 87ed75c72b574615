"""Reading a Hugging Face checkpoint folder without loading tensors.

`read_config(dir)` parses config.json; `tensor_index(dir)` reads the safetensors headers
(name -> dtype, shape, file) of a single-file or sharded checkpoint. Every failure is a
SpecirError naming the path and what to do.
"""
from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import SourceLocation, SpecirError

SAFETENSORS_DTYPES = {"BF16": "bf16", "F16": "f16", "F32": "f32", "F64": "f64", "I64": "i64",
                      "I32": "i32", "I16": "i16", "I8": "i8", "U8": "u8", "BOOL": "bool"}


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    file: Path


def checkpoint_dir(path: str | Path, where: SourceLocation | None = None) -> Path:
    folder = Path(path)
    if not folder.exists():
        raise SpecirError(f"checkpoint folder {str(path)!r} does not exist", location=where, path=str(path),
                          hint="give a Hugging Face model folder (config.json, *.safetensors, tokenizer.json)")
    if not folder.is_dir():
        raise SpecirError(f"{str(path)!r} is a file, not a checkpoint folder", location=where, path=str(path),
                          hint="give the folder that holds config.json")
    return folder


def read_config(path: str | Path, where: SourceLocation | None = None) -> dict:
    folder = checkpoint_dir(path, where)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise SpecirError(f"{folder} has no config.json", location=where, path=str(config_path),
                          hint="a Hugging Face checkpoint folder holds config.json (save_pretrained writes it)")
    try:
        config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        where_text = f" (line {line}, column {exc.colno})" if line else ""
        raise SpecirError(f"config.json is not valid JSON{where_text}: {getattr(exc, 'msg', exc)}",
                          location=where, path=str(config_path),
                          hint="the file is corrupt; re-save it with save_pretrained") from None
    if not isinstance(config, dict):
        raise SpecirError("config.json must hold a JSON object", location=where, path=str(config_path),
                          hint="the file is not a Hugging Face config; re-save it with save_pretrained")
    return config


DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
               "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def _read_header(file: Path, where: SourceLocation | None) -> dict:
    """The safetensors header of `file`, checked against the file: every tensor's data offsets lie
    inside the data section and span exactly its shape x dtype bytes (a file cut short or with
    offsets past its end is found here, at init/compile, not when the weights are read)."""
    try:
        with open(file, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ValueError("file is shorter than the 8-byte header length")
            (size,) = struct.unpack("<Q", raw)
            file_size = os.fstat(f.fileno()).st_size
            if size > 100_000_000 or size > file_size - 8:
                raise ValueError(f"header length {size} is impossible for a file of {file_size} bytes")
            header = json.loads(f.read(size))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise SpecirError(f"{file.name} is not a readable safetensors file: {exc}", location=where,
                          path=str(file), hint="the file is truncated or corrupt; re-save the checkpoint") from None
    if not isinstance(header, dict):
        raise SpecirError(f"{file.name} is not a safetensors file: its header is not a JSON object", location=where,
                          path=str(file), hint="the file is corrupt; re-save the checkpoint")
    header.pop("__metadata__", None)
    data_size = file_size - 8 - size
    for name, info in header.items():
        problem = _tensor_problem(info, data_size)
        if problem:
            truncated = "past" in problem
            raise SpecirError(f"{file.name}{' is truncated' if truncated else ' is corrupt'}: tensor {name!r} {problem}",
                              location=where, path=str(file),
                              hint="the file was cut short (an interrupted copy or download?); copy or re-save the "
                                   "checkpoint" if truncated else "re-save the checkpoint (save_pretrained)")
    return header


def _tensor_problem(info, data_size: int) -> str | None:
    """What is wrong with one header entry against a data section of `data_size` bytes, or None."""
    if not isinstance(info, dict):
        return "has no dtype/shape/data_offsets entry"
    shape, offsets, dtype = info.get("shape"), info.get("data_offsets"), info.get("dtype")
    if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        return f"has an invalid shape {shape!r}"
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) and not isinstance(o, bool)
                                                                    for o in offsets) and 0 <= offsets[0] <= offsets[1]):
        return f"has invalid data_offsets {offsets!r}"
    begin, end = offsets
    if end > data_size:
        return f"ends at byte {end} of the data, past its end (the file holds {data_size} bytes of data)"
    width = DTYPE_BYTES.get(dtype)
    if width is not None and end - begin != math.prod(shape) * width:
        return (f"spans {end - begin} bytes, but {dtype}{shape} needs {math.prod(shape) * width}")
    return None


def tensor_index(path: str | Path, where: SourceLocation | None = None) -> dict[str, TensorInfo]:
    """All tensors of the checkpoint: name -> TensorInfo, read from headers only."""
    folder = checkpoint_dir(path, where)
    index_file = folder / "model.safetensors.index.json"
    if index_file.is_file():
        try:
            weight_map = json.loads(index_file.read_text())["weight_map"]
            if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
                raise TypeError
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            raise SpecirError("model.safetensors.index.json is corrupt (no weight_map of tensor -> file name)",
                              location=where, path=str(index_file),
                              hint="re-save the checkpoint (save_pretrained writes the index)") from None
        files = sorted({folder / f for f in weight_map.values()})
    else:
        files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise SpecirError(f"{folder} holds no *.safetensors weights", location=where, path=str(folder),
                          hint="specir reads safetensors checkpoints (save_pretrained(..., safe_serialization=True))")
    tensors: dict[str, TensorInfo] = {}
    for file in files:
        if not file.is_file():
            raise SpecirError(f"weight file {file.name} listed in the index is missing", location=where,
                              path=str(file), hint="copy the missing shard, or re-save the checkpoint")
        for name, info in _read_header(file, where).items():
            dtype = SAFETENSORS_DTYPES.get(info.get("dtype"), str(info.get("dtype")).lower())
            tensors[name] = TensorInfo(dtype, tuple(info.get("shape", ())), file)
    return tensors
