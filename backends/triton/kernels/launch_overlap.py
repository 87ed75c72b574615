"""Launch overlap (programmatic dependent launch, sm_90+): a launch starts while the one before it drains.

A kernel launched with `launch_pdl=True` may be scheduled once every program of the launch before
it has called `launch_dependents()` (or ended). It must call `await_inputs()` before it reads or
writes any memory that an earlier launch writes or reads; that returns once every earlier launch
has finished and its writes are visible. Before that point it may only read memory that no launch
of the step writes (weights) and prefetch it into L2 (`prefetch_l2`). So overlap changes when
loads are issued, never a value: the results are the bits of the plain launches.

Measured (bench/gemv_chain.py, the 8B layer's four fused GEMVs x 32 layers in a CUDA graph, H100, session
23): plain 5.136 ms, overlapped 5.047 ms (-1.7 %), overlapped with 4 iterations prefetched into L2 5.417 ms
(+5.5 %: the prefetches compete with the draining launch for DRAM). So the GEMV prefetches nothing by
default (`LinearConfig.overlap_iters` = 0).

Every helper is a no-op in Triton's CPU interpreter (no PTX there) and `launch_dependents` is one
instruction that a launch without a dependent ignores, so kernels call it unconditionally (the
GEMV/GEMM, norm, rope, silu_mul and add kernels). The attention calls it only where the next launch
prefetches its weights meanwhile (`lets_next_start`, fusion{attention_prefetch}): without that, the next
launch's waiting programs slowed it by a third (session 23).
`overlap_available(device)` says whether a launch may ask for `launch_pdl`.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ._interpreter_compat import interpreting
from ._numerics import INTERPRET


@triton.jit
def launch_dependents():
    """Let the next launch (if it asked for `launch_pdl`) be scheduled now; a hint, no ordering."""
    if not INTERPRET:
        gdc_launch_dependents()


@triton.jit
def await_inputs(PDL: tl.constexpr):
    """With PDL: block until every earlier launch has finished and its writes are visible."""
    if PDL:
        if not INTERPRET:
            gdc_wait()


@triton.jit
def prefetch_l2(ptrs):
    """Bring the 128-byte lines holding `ptrs` into L2; no value reaches a register and nothing
    waits for the lines. Every address must be valid (clamp, there is no mask); only for memory
    that no launch of the step writes."""
    if not INTERPRET:
        tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32,
                                  is_pure=False, pack=1)


def overlap_available(device: torch.device) -> bool:
    """Whether launches on `device` may ask for `launch_pdl` (a compiled Triton kernel on sm_90+)."""
    if interpreting() or device.type != "cuda":
        return False
    return _sm90_or_later(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _sm90_or_later(index: int) -> bool:
    return torch.cuda.get_device_capability(index)[0] >= 9
