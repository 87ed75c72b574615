"""Weight formats the linear kernel can read: the weight-decode stage of `linear.py`.

The linear kernel never reads a weight directly. It asks a format for the TE placeholders that
hold the stored weights and for `decode(tensors, n, k)`, an fp32 TIR expression of weight
`w[n, k]`. The schedule materialises the decoded weights one register tile at a time
(`[rows_per_tile, k_lanes]`) inside the K loop, so the decoded matrix never exists in memory:
for bf16 the decode is a widening shift in registers, which is what halves the bytes a
memory-bound GEMV reads compared with fp32 weights.

A packed format (BF12, docs/BF12.md) plugs in by subclassing `WeightFormat`: its placeholders
are its planes, `decode` rebuilds the bf16 bits of one weight from them, and `k_multiple` tells
the schedule which K tiles keep a tile inside one group.
"""

from __future__ import annotations

import torch
from tvm import te

from .alignment import aligned

_TORCH_TO_TVM = {torch.float32: "float32", torch.bfloat16: "bfloat16"}


class WeightFormat:
    """Interface of a weight format (see the module docstring)."""

    name: str
    k_multiple: int = 1  # K tiles the schedule uses must divide this or be multiples of it

    def cache_key(self) -> str:
        """Names the format and every option that changes its code."""
        return self.name

    def shape(self, weight) -> tuple[int, int]:
        """(N, K) of the logical weight matrix."""
        raise NotImplementedError

    def placeholders(self, n: int, k: int) -> list[te.Tensor]:
        raise NotImplementedError

    def decode(self, tensors: list[te.Tensor], n, k):
        """fp32 TIR expression of logical weight [n, k]."""
        raise NotImplementedError

    def kernel_args(self, weight) -> list[torch.Tensor]:
        """The torch tensors to pass for `placeholders`, in order (no copies)."""
        raise NotImplementedError

    def bytes_read(self, weight) -> int:
        """Bytes one pass over the weight reads (for bandwidth figures)."""
        return sum(t.numel() * t.element_size() for t in self.kernel_args(weight))


class DenseWeights(WeightFormat):
    """A plain row-major `[N, K]` matrix in bf16 or fp32; decode = exact widening to fp32."""

    def __init__(self, dtype: str):
        if dtype not in ("bfloat16", "float32"):
            raise ValueError(f"dense weights must be bfloat16 or float32, got {dtype}")
        self.dtype = dtype
        self.name = f"dense-{dtype}"

    def shape(self, weight: torch.Tensor) -> tuple[int, int]:
        return tuple(weight.shape)

    def placeholders(self, n: int, k: int) -> list[te.Tensor]:
        return [te.placeholder((n, k), self.dtype, name="w")]

    def decode(self, tensors, n, k):
        (w,) = tensors
        return w[n, k] if self.dtype == "float32" else w[n, k].astype("float32")

    def kernel_args(self, weight: torch.Tensor) -> list[torch.Tensor]:
        return [aligned(weight if weight.is_contiguous() else weight.contiguous())]


def weight_format_for(weight) -> WeightFormat:
    """The format of a weight object (a torch tensor for dense weights)."""
    if isinstance(weight, torch.Tensor):
        if weight.dim() != 2 or weight.dtype not in _TORCH_TO_TVM:
            raise ValueError(f"linear weight must be a 2-D bf16/fp32 tensor, got {tuple(weight.shape)} {weight.dtype}")
        return DenseWeights(_TORCH_TO_TVM[weight.dtype])
    fmt = getattr(weight, "tvm_weight_format", None)
    if fmt is None:
        raise TypeError(f"no TVM weight format for {type(weight).__name__}")
    return fmt()
