"""Reading a Hugging Face checkpoint folder without loading tensors.

`read_config(dir)` parses config.json; `tensor_index(dir)` reads the safetensors headers
(name -> dtype, shape, file) of a single-file or sharded checkpoint. Every failure is a
SpecirError naming the path and what to do.
"""
from __future__ import annotations

import json
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
        raise SpecirError("config.json must hold a JSON object", location=where, path=str(config_path))
    return config


def _read_header(file: Path, where: SourceLocation | None) -> dict:
    try:
        with open(file, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ValueError("file is shorter than the 8-byte header length")
            (size,) = struct.unpack("<Q", raw)
            if size > 100_000_000 or size > file.stat().st_size:
                raise ValueError(f"header length {size} is impossible")
            header = json.loads(f.read(size))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise SpecirError(f"{file.name} is not a readable safetensors file: {exc}", location=where,
                          path=str(file), hint="the file is truncated or corrupt; re-save the checkpoint") from None
    header.pop("__metadata__", None)
    return header


def tensor_index(path: str | Path, where: SourceLocation | None = None) -> dict[str, TensorInfo]:
    """All tensors of the checkpoint: name -> TensorInfo, read from headers only."""
    folder = checkpoint_dir(path, where)
    index_file = folder / "model.safetensors.index.json"
    if index_file.is_file():
        try:
            weight_map = json.loads(index_file.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise SpecirError("model.safetensors.index.json is corrupt (no weight_map)", location=where,
                              path=str(index_file)) from None
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
                              path=str(file))
        for name, info in _read_header(file, where).items():
            dtype = SAFETENSORS_DTYPES.get(info.get("dtype"), str(info.get("dtype")).lower())
            tensors[name] = TensorInfo(dtype, tuple(info.get("shape", ())), file)
    return tensors
