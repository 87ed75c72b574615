"""The TVM kernels' one assumption about memory: every tensor argument starts 64 bytes aligned.

TVM declares each buffer argument with its default `data_alignment` (64 bytes), and LLVM then
emits aligned vector loads for fp32 data: a misaligned fp32 buffer faults (SIGSEGV) instead of
raising. torch's CPU allocator returns 64-byte aligned memory, but tensors memory-mapped from a
safetensors file are only element-aligned (the header length decides where the data starts),
which is what a float32 checkpoint hands the kernels. (bf16 kernels widen through integer
loads, which LLVM emits unaligned, so bf16 checkpoints never showed it.)

`aligned(t)` is the guard: `t` itself when it is aligned (no copy, the hot path), else a
64-byte aligned copy. Wrappers pass inputs through it; the op table aligns each weight once per
runner (op_table.py), so a forward never copies a weight.
"""
from __future__ import annotations

import torch

ALIGNMENT = 64  # bytes; TVM's default data_alignment (kAllocAlignment)


def is_aligned(t: torch.Tensor) -> bool:
    return t.data_ptr() % ALIGNMENT == 0


def aligned(t: torch.Tensor) -> torch.Tensor:
    """`t` when it starts on a 64-byte boundary, else a contiguous 64-byte aligned copy."""
    if is_aligned(t):
        return t
    copy = torch.empty(t.shape, dtype=t.dtype)
    if not is_aligned(copy):  # torch's CPU allocator aligns to 64; never rely on it silently
        pad = ALIGNMENT // t.element_size()
        raw = torch.empty(t.numel() + pad, dtype=t.dtype)
        start = (-raw.data_ptr() % ALIGNMENT) // t.element_size()
        copy = raw[start:start + t.numel()].view(t.shape)
    return copy.copy_(t)
