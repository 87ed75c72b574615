"""Bits per weight and exponent statistics of BF12, with every stored byte counted.

`analyze(w)` measures a bf16 matrix without building the planes; `bits_per_weight(packed)` counts
a packed one (tensors plus its safetensors header entry). `gaussian_report` and
`safetensors_report` produce rows for `format_report`, a markdown table.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .layout import ESCAPE_CODE, GROUP, WINDOW, padded_k
from .matrix import BF12Matrix
from .pack import _CHUNK_ELEMENTS, bf16_bits, group_windows
from .serialize import header_entry

# header bytes per matrix: the JSON entry plus the key (`<name>.bf12`); safetensors also keeps
# ~60 bytes of offsets per tensor; both are counted with a typical 48-character name.
_NAME_BYTES = 48
_TENSOR_HEADER_BYTES = 60 + _NAME_BYTES


@dataclass(frozen=True)
class MatrixStats:
    shape: tuple[int, int]
    bits_per_weight: float     # BF12 bytes * 8 / weights, all metadata counted
    raw_rows: int              # rows kept as bf16
    escapes: int               # packed weights that take the escape value (code 7, not base - 7)
    zeros: int                 # weights equal to +-0
    distinct_exponents: int    # distinct exponent fields in the matrix
    exponent_entropy: float    # bits, over all weights
    top14_coverage: float      # fraction of weights inside the best 14 consecutive exponents

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "MatrixStats":
        return cls(**{**d, "shape": tuple(d["shape"])})


def stored_bytes(n: int, k: int, raw_rows: int) -> int:
    """Bytes BF12 stores for an [n, k] matrix with `raw_rows` raw rows, header included."""
    kp = padded_k(k)
    packed = n - raw_rows
    planes = packed * (kp + kp // 2 + 2 * (kp // GROUP))
    raw = raw_rows * (2 * k + 4)
    tensors = 4 + (2 if raw_rows else 0)
    header = len(header_entry((n, k))) + _NAME_BYTES + 5 + tensors * _TENSOR_HEADER_BYTES
    return planes + raw + header


def bits_per_weight(packed: BF12Matrix) -> float:
    n, k = packed.shape
    return 8.0 * stored_bytes(n, k, packed.raw_row_count) / (n * k)


def analyze(w: torch.Tensor) -> MatrixStats:
    """Statistics of a 2-D bf16 matrix as BF12 would store it (no planes are built).

    Runs on `w`'s device (every step is integer arithmetic, so CPU and GPU give equal statistics)."""
    if w.dim() != 2 or w.dtype != torch.bfloat16:
        raise ValueError(f"analyze wants a 2-D bf16 matrix, got {tuple(w.shape)} {w.dtype}")
    n, k = w.shape
    w = w.detach()
    kp = padded_k(k)
    step = max(1, _CHUNK_ELEMENTS // kp)
    hist = torch.zeros(256, dtype=torch.int64, device=w.device)
    valid = torch.arange(kp, device=w.device) < k
    raw_rows = escapes = zeros = 0
    for i in range(0, n, step):
        bits = bf16_bits(w[i:i + step])
        rows = bits.shape[0]
        zeros += int(((bits & 0x7FFF) == 0).sum())
        exp = (bits >> 7) & 0xFF
        hist += torch.bincount(exp.flatten(), minlength=256)
        if kp != k:
            first = exp[:, (kp // GROUP - 1) * GROUP][:, None].expand(rows, kp - k)
            exp = torch.cat([exp, first], dim=1)
        high = exp.view(rows, kp // GROUP, GROUP) >> 1
        base, esc, ok = group_windows(high)
        row_ok = ok.all(-1)
        raw_rows += int((~row_ok).sum())
        natural = base - WINDOW
        off = base[..., None] - high
        escaped = (high == esc[..., None]) & ((off >= WINDOW) | (off < 0)) & (esc != natural)[..., None]
        escapes += int((escaped.view(rows, kp) & valid & row_ok[:, None]).sum())
    hist = hist.cpu()
    p = hist.double() / hist.sum()
    entropy = float(-(p[p > 0] * p[p > 0].log2()).sum())
    windows = hist.cumsum(0)
    best = max(int(windows[i] - (windows[i - 14] if i >= 14 else 0)) for i in range(256))
    return MatrixStats((n, k), 8.0 * stored_bytes(n, k, raw_rows) / (n * k), raw_rows, escapes,
                       zeros, int((hist > 0).sum()), entropy, best / (n * k))


def gaussian_report(n: int = 4096, k: int = 4096, std: float = 0.02, seed: int = 0) -> dict:
    """Stats of a Gaussian N(0, std) bf16 matrix (a row for `format_report`)."""
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn(n, k, generator=g) * std).to(torch.bfloat16)
    return {"name": f"gaussian N(0,{std}) {n}x{k}", **analyze(w).as_dict()}


def safetensors_report(path: str | Path, min_elements: int = GROUP * GROUP) -> list[dict]:
    """Stats of every 2-D bf16 tensor of a safetensors file (rows for `format_report`),
    followed by a total row weighted by element count."""
    from safetensors import safe_open

    rows, bits_sum, count = [], 0.0, 0
    with safe_open(str(path), framework="pt") as f:
        for name in sorted(f.keys()):
            sl = f.get_slice(name)
            shape = sl.get_shape()
            if len(shape) != 2 or sl.get_dtype() != "BF16" or math.prod(shape) < min_elements:
                continue
            s = analyze(f.get_tensor(name))
            rows.append({"name": name, **s.as_dict()})
            bits_sum += s.bits_per_weight * math.prod(shape)
            count += math.prod(shape)
    if count:
        rows.append({"name": "TOTAL", "shape": None, "bits_per_weight": bits_sum / count})
    return rows


def format_report(rows: list[dict]) -> str:
    """A markdown table of report rows."""
    cols = ["name", "shape", "bits_per_weight", "raw_rows", "escapes", "zeros",
            "distinct_exponents", "exponent_entropy", "top14_coverage"]
    fmt = lambda v: "" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)
