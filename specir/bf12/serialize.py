"""BF12 matrices in safetensors files.

Naming scheme for a matrix stored under `<name>` (e.g. `model.layers.0.mlp.up_proj.weight`):

| tensor                    | dtype | shape         | when          |
|---------------------------|-------|---------------|---------------|
| `<name>.bf12.mant`        | U8    | `[P, Kp]`     | always        |
| `<name>.bf12.code`        | U8    | `[P, Kp/2]`   | always        |
| `<name>.bf12.base`        | U8    | `[P, Kp/128]` | always        |
| `<name>.bf12.esc`         | U8    | `[P, Kp/128]` | always        |
| `<name>.bf12.raw`         | BF16  | `[R, K]`      | R > 0         |
| `<name>.bf12.raw_rows`    | I32   | `[R]`         | R > 0         |

and one header (`__metadata__`) entry `<name>.bf12` = JSON
`{"format": "bf12", "version": 2, "shape": [N, K], "group": 128}`.

Version 1 files (the first layout: sign+mantissa bytes, 4-bit exponent codes) are still read:
`from_tensors` decodes them and packs the matrix again in the current layout.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from specir.errors import SpecirError

from .layout import GROUP
from .matrix import BF12Matrix

SUFFIX = ".bf12"
VERSION = 2
_PARTS = ("mant", "code", "base", "esc", "raw", "raw_rows")


def header_entry(shape: tuple[int, int]) -> str:
    """The JSON string stored in the safetensors header for one matrix of `shape` [N, K]."""
    return json.dumps({"format": "bf12", "version": VERSION, "shape": list(shape), "group": GROUP},
                      separators=(",", ":"))


def to_tensors(name: str, packed: BF12Matrix) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(tensors, header entries) that store `packed` under `name`."""
    tensors = {f"{name}{SUFFIX}.{part}": t.contiguous().cpu() for part, t in packed.tensors().items()}
    return tensors, {f"{name}{SUFFIX}": header_entry(packed.shape)}


def packed_names(metadata: dict[str, str] | None) -> list[str]:
    """Names of the BF12 matrices that a safetensors header declares."""
    return sorted(key[: -len(SUFFIX)] for key in (metadata or {}) if key.endswith(SUFFIX))


def from_tensors(name: str, tensors: dict[str, torch.Tensor], metadata: dict[str, str],
                 source: str = "<tensors>") -> BF12Matrix:
    """Rebuild the matrix stored under `name`; a SpecirError names what is missing or wrong."""
    key = f"{name}{SUFFIX}"
    try:
        info = json.loads(metadata[key])
        if info.get("format") != "bf12" or info.get("version") not in (1, VERSION) or info.get("group") != GROUP:
            raise ValueError(f"unsupported header {info}")
        shape = tuple(int(d) for d in info["shape"])
        parts = {p: tensors.get(f"{key}.{p}") for p in _PARTS}
        for p in ("mant", "code", "base", "esc"):
            if parts[p] is None:
                raise ValueError(f"tensor {key}.{p} is missing")
        dev = parts["mant"].device
        if parts["raw"] is None:
            parts["raw"] = torch.empty(0, shape[1], dtype=torch.bfloat16, device=dev)
            parts["raw_rows"] = torch.empty(0, dtype=torch.int32, device=dev)
        packed = BF12Matrix(shape, **parts)
        return _from_version_1(packed) if info["version"] == 1 else packed
    except (KeyError, ValueError, TypeError, json.JSONDecodeError) as exc:
        raise SpecirError(f"corrupt BF12 matrix {name!r}: {exc}", path=source,
                          hint="re-run pack-weights on the original checkpoint") from None


def _from_version_1(old: BF12Matrix) -> BF12Matrix:
    """Decode a version-1 matrix (bytes: sign + 7 mantissa bits; 4-bit codes, exponent = base -
    code or esc for code 15; the pair-slot byte order of version 1) and pack it again."""
    from .pack import pack

    n, k = old.shape
    p, kp = old.mant.shape
    kk = torch.arange(GROUP, device=old.device)
    r, t, par = kk // 32, (kk % 32) // 2, kk % 2
    mant_pos = 8 * t + 4 * (r // 2) + (r % 2) + 2 * par
    nibble_pos = 8 * t + r + 4 * par
    sm = old.mant.view(p, kp // GROUP, GROUP).to(torch.int32)[..., mant_pos]
    pair = old.code.view(p, kp // GROUP, GROUP // 2).to(torch.int32)
    c = torch.stack([pair & 0xF, pair >> 4], dim=-1).view(p, kp // GROUP, GROUP)[..., nibble_pos]
    e = torch.where(c == 15, old.esc.to(torch.int32)[..., None], old.base.to(torch.int32)[..., None] - c)
    bits = (((sm & 0x80) << 8) | (e << 7) | (sm & 0x7F)).view(p, kp)[:, :k]
    w = torch.empty(n, k, dtype=torch.bfloat16, device=old.device)
    if old.raw_row_count:
        w[old.raw_rows.long()] = old.raw
        w[old.rows.long()] = bits.to(torch.int16).view(torch.bfloat16)
    else:
        w.copy_(bits.to(torch.int16).view(torch.bfloat16))
    return pack(w)


def save(path: str | Path, matrices: dict[str, BF12Matrix],
         extra: dict[str, torch.Tensor] | None = None) -> None:
    """Write BF12 matrices (and optional plain tensors) to one safetensors file."""
    from safetensors.torch import save_file

    tensors, metadata = dict(extra or {}), {}
    for name, packed in matrices.items():
        t, m = to_tensors(name, packed)
        tensors.update(t)
        metadata.update(m)
    save_file(tensors, str(path), metadata=metadata)


def load(path: str | Path, device: str | torch.device = "cpu") -> dict[str, BF12Matrix]:
    """Read every BF12 matrix of a safetensors file."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt", device=str(device)) as f:
            metadata = f.metadata() or {}
            names = packed_names(metadata)
            wanted = {k for k in f.keys() if any(k.startswith(f"{n}{SUFFIX}.") for n in names)}
            tensors = {k: f.get_tensor(k) for k in wanted}
    except (OSError, RuntimeError, SafetensorError) as exc:
        raise SpecirError(f"cannot read safetensors file: {exc}", path=str(path),
                          hint="is the file complete? re-run pack-weights") from None
    return {n: from_tensors(n, tensors, metadata, str(path)) for n in names}
