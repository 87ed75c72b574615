"""`BF12Matrix`: one packed `[N, K]` bf16 matrix as a handful of plain tensors.

Rows whose exponents the per-group window cannot express (see docs/BF12.md) are kept as raw bf16
rows; every other row is packed. All tensors live on one device; `to()` moves them together.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from .layout import GROUP, padded_k


@dataclass
class BF12Matrix:
    """A bf16 matrix `[N, K]` in BF12.

    - `mant`  uint8 `[P, Kp]`: sign + 7 mantissa bits per weight, in the layout's byte order.
    - `code`  uint8 `[P, Kp // 2]`: 4-bit exponent codes, two per byte.
    - `base`  uint8 `[P, Kp // 128]`: per-group base exponent (code c < 15: exponent = base - c).
    - `esc`   uint8 `[P, Kp // 128]`: per-group escape exponent (code 15).
    - `raw`   bf16 `[R, K]`, `raw_rows` int32 `[R]`: rows kept raw and their row indices.
    P + R = N; `Kp` is K rounded up to a multiple of 128. Packed rows are the rows not in
    `raw_rows`, ascending (`rows`, derived, int32, or None when R = 0).
    """

    shape: tuple[int, int]
    mant: torch.Tensor
    code: torch.Tensor
    base: torch.Tensor
    esc: torch.Tensor
    raw: torch.Tensor
    raw_rows: torch.Tensor
    rows: torch.Tensor | None = field(default=None)

    def __post_init__(self):
        n, k = self.shape
        self.shape = (int(n), int(k))
        kp = padded_k(k)
        p, r = self.mant.shape[0], self.raw.shape[0]
        expect = {
            "mant": ((p, kp), torch.uint8), "code": ((p, kp // 2), torch.uint8),
            "base": ((p, kp // GROUP), torch.uint8), "esc": ((p, kp // GROUP), torch.uint8),
            "raw": ((r, k), torch.bfloat16), "raw_rows": ((r,), torch.int32),
        }
        for name, (shape, dtype) in expect.items():
            t = getattr(self, name)
            if tuple(t.shape) != shape or t.dtype != dtype:
                raise ValueError(f"BF12 {name}: got {tuple(t.shape)} {t.dtype}, want {shape} {dtype}")
        if p + r != n:
            raise ValueError(f"BF12: {p} packed + {r} raw rows != {n} rows")
        if self.rows is None and r > 0:
            keep = torch.ones(n, dtype=torch.bool, device=self.raw_rows.device)
            keep[self.raw_rows.long()] = False
            self.rows = keep.nonzero().flatten().to(torch.int32)

    @property
    def device(self) -> torch.device:
        return self.mant.device

    @property
    def packed_rows(self) -> int:
        return self.mant.shape[0]

    @property
    def raw_row_count(self) -> int:
        return self.raw.shape[0]

    def tensors(self) -> dict[str, torch.Tensor]:
        """The stored tensors by suffix (what serialization writes; `rows` is derived)."""
        out = {"mant": self.mant, "code": self.code, "base": self.base, "esc": self.esc}
        if self.raw_row_count:
            out.update(raw=self.raw, raw_rows=self.raw_rows)
        return out

    def nbytes(self) -> int:
        """Bytes of the stored tensors (metadata header not included; see `stats`)."""
        return sum(t.numel() * t.element_size() for t in self.tensors().values())

    def to(self, device) -> "BF12Matrix":
        move = lambda t: None if t is None else t.to(device)
        return replace(self, mant=move(self.mant), code=move(self.code), base=move(self.base),
                       esc=move(self.esc), raw=move(self.raw), raw_rows=move(self.raw_rows),
                       rows=move(self.rows))
