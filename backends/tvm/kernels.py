"""`CPUKernels`: the TVM CPU kernel set as one object a runtime calls with torch tensors.

    kernels = CPUKernels(build_dir / "tvm")        # compiled libraries are kept there
    y = kernels.linear(x, w, bias)                 # x [..., K] fp32/bf16, w [N, K] bf16/fp32
    y = kernels.rms_norm(x, w, eps)                # or (y, h) = kernels.rms_norm(x, w, eps, residual)
    q, k = kernels.rotary(q, k, pos, inv_freq)      # k may be None: q alone
    a = kernels.silu_mul(gate, up)                 # or kernels.silu_mul(gate_up)
    o = kernels.attention(q, k_cache, v_cache, lens, tree_mask)   # + slots=, offsets= (scratch rows)
    kernels.kv_write(k_cache, v_cache, k, v, lens); lens = kernels.kv_compact(...)

Every method follows docs/KERNEL_CONTRACTS.md and its twin in `reference.py`. Inputs are read
in place (DLPack, no copies) when contiguous; outputs are new tensors unless `out=` is given.
The first call with a new static shape compiles (or loads from `cache_dir`); later calls reuse it.

What is static (one compiled kernel each) and what is a runtime size:
| kernel    | static                                         | symbolic                    |
| linear    | N, K, weight format, act dtype, bias, tile     | M (in blocks of the tile)   |
| rms_norm  | hidden, dtypes, fused residual                 | rows                        |
| silu_mul  | width, dtype, fused [gate|up]                  | rows                        |
| rotary    | heads, kv heads, head_dim, dtype               | tokens, q/k strides         |
| attention | heads, kv heads, head_dim, dtype, masked, variant | batch, T, slots, max_seq  |
Each also has a serial and a parallel variant where small calls exist (decode rows); with
`host_target.set_threads(1)` every call is serial (and parallel variants are never compiled). A model
therefore needs a few dozen kernels, whatever its batch sizes, tree sizes and context lengths.
kv_write / kv_compact are torch (pure data movement; see kv_cache.py).
"""

from __future__ import annotations

import os

import torch

from . import attention as _attention
from . import kv_cache as _kv_cache
from . import linear as _linear
from . import rms_norm as _rms_norm
from . import rotary as _rotary
from . import silu_mul as _silu_mul
from .kernel_cache import KernelCache


class CPUKernels:
    """The kernels for the host CPU, compiled into (and loaded from) `cache_dir`."""

    def __init__(self, cache_dir: str | os.PathLike | None = None, *, cache=None):
        """`cache`: a ready KernelCache (or any object with its `get`/`host`/`plans`) instead."""
        self.cache = cache if cache is not None else KernelCache(cache_dir)

    def linear(self, x: torch.Tensor, weight, bias: torch.Tensor | None = None, *, out=None, schedule="tiled"):
        return _linear.linear(self.cache, x, weight, bias, out=out, schedule=schedule)

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None, *, out=None):
        return _rms_norm.rms_norm(self.cache, x, weight, eps, residual, out=out)

    def rotary(self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor,
               attention_scaling: float = 1.0, *, q_out=None, k_out=None):
        return _rotary.rotary(self.cache, q, k, pos, inv_freq, attention_scaling, q_out=q_out, k_out=k_out)

    def silu_mul(self, gate: torch.Tensor, up: torch.Tensor | None = None, *, out=None):
        return _silu_mul.silu_mul(self.cache, gate, up, out=out)

    def attention(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lens: torch.Tensor,
                  tree_mask: torch.Tensor | None = None, scale: float | None = None, *, out=None,
                  slots: torch.Tensor | None = None, offsets: torch.Tensor | None = None):
        return _attention.attention(self.cache, q, k_cache, v_cache, lens, tree_mask, scale, out=out,
                                    slots=slots, offsets=offsets)

    kv_write = staticmethod(_kv_cache.kv_write)
    kv_compact = staticmethod(_kv_cache.kv_compact)
