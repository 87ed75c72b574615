"""The identity of a checkpoint: one sha256 over its config.json and weight files.

Contract: `checkpoint_digest(folder)` returns "sha256:<hex>" over the sorted list of
(file name, sha256 of the file) for config.json, model.safetensors.index.json (if present) and
every *.safetensors file the checkpoint reads. Each file's sha256 is cached in
`<cache>/digests.json` (specir.file_cache: kept while the file's stamp is unchanged), so a second
call costs a stat per file.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from ..errors import SpecirError
from ..file_cache import FileCache

CHUNK = 8 << 20


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


_CACHE = FileCache("digests")


def checkpoint_files(folder: Path) -> list[Path]:
    files = [folder / "config.json"]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files.append(index)
    files += sorted(folder.glob("*.safetensors"))
    return [f for f in files if f.is_file()]


def checkpoint_digest(folder: str | Path, *, use_cache: bool = True) -> str:
    folder = Path(folder)
    files = checkpoint_files(folder)
    if not files:
        raise SpecirError(f"{folder} holds no checkpoint files", path=str(folder),
                          hint="a Hugging Face folder with config.json and *.safetensors")
    lines = []
    for f in files:
        try:
            digest = _CACHE.get_or_compute(f, "sha256", lambda f=f: _file_sha256(f)) if use_cache else _file_sha256(f)
        except OSError as exc:
            raise SpecirError(f"cannot read {f}: {exc.strerror}", path=str(f)) from None
        lines.append(f"{f.name}\0{digest}\n")
    return "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()
