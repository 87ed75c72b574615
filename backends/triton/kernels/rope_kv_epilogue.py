"""The rope + KV-cache write as the epilogue of the q|k|v GEMV (one token).

A GEMV program whose tile is one whole head (block_n = head_dim = 2 HALF, full rotary) of the
grouped projection y = [q (H heads) | k (KH heads) | v (KH heads)] holds both halves that rope
pairs. `store_head` takes the tile's values, already rounded to the activation dtype as the plain
kernel stores them, and writes what `rope.rope_kv_write` would: q heads rotated into q's buffer,
k heads rotated and v heads as they are into cache row lens[0] + offsets[0] of slot slots[0]
(skipped when that row is past max_seq, or with n_rows when n_rows[0] is 0). The rotation is
rope.py's (`rope_cos_sin`, `rotate_half`), so the bits are those of the linear then rope_kv_write.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ._interpreter_compat import interpreting
from .rope import rope_cos_sin, rotate_half

# Compiled forwards run the epilogue only once its kernel tests (tests/triton/test_linear_rope_kv.py) have
# passed on a GPU. Session 24's H200 run failed the first (14 of 64 q values one bf16 ulp off): the standalone
# rope kernel, the test's reference, had its rotation's rounded product and sum contracted into one bf16 fma.
# rope.py now rounds products with `round_product` (inline PTX the compiler cannot fuse; compile_check counts
# half-precision fmas: none). Session 25 ran the tests on an H100 (sm_90, the H200's PTX): the kernel and rope
# tests (42), the fused forwards' tests with this flag set (15) and tree-fr-all's token forcing (0 mismatches)
# passed (bench/results/gpu-2026-12-07-session25). False would make GPU forwards run the linear and then
# rope_kv_write: the same bits, one launch more a layer.
VERIFIED_ON_GPU = True


def epilogue_runs_here(device: torch.device) -> bool:
    """Whether a forward on `device` runs the rope + KV write in the GEMV (the interpreter always)."""
    return interpreting() or device.type != "cuda" or VERIFIED_ON_GPU


def _one_token(rows: int) -> str | None:
    return None if rows == 1 else f"{rows} rows (the epilogue serves one token)"


def _head_tile(head_dim: int) -> str | None:
    fits = head_dim >= 16 and head_dim & (head_dim - 1) == 0
    return None if fits else f"head_dim {head_dim} is not a power of two >= 16"


def listed_in_gemv(rows: int, head_dim: int) -> bool:
    """Whether a GPU target's forward of `rows` rows runs the epilogue in the GEMV, as far as the
    launch listing (no weights, no rope tables) can tell: `RopeKV.why_not_fused`'s row and head
    checks, once VERIFIED_ON_GPU (partial rotary and raw BF12 rows it cannot see)."""
    return VERIFIED_ON_GPU and _one_token(rows) is None and _head_tile(head_dim) is None


@dataclass
class RopeKV:
    """The rope_kv_write of one token that a q|k|v GEMV does in its epilogue (`linear_bf16(...,
    rope_kv=...)`): rope.rope_kv_write's arguments. pos, lens, slots, offsets: one entry each
    (request 0, token 0); caches [slots, kv_heads, max_seq, head_dim]; n_rows as rope_kv_write's."""

    heads: int
    kv_heads: int
    pos: torch.Tensor
    inv_freq: torch.Tensor
    attention_scaling: float
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    lens: torch.Tensor
    slots: torch.Tensor | None = None
    offsets: torch.Tensor | None = None
    n_rows: torch.Tensor | None = None

    @property
    def head_dim(self) -> int:
        return self.k_cache.shape[-1]

    def why_not_fused(self, rows: int, n: int, raw_rows: int = 0) -> str | None:
        """Why a GEMV over `rows` x rows of n outputs cannot run this in its epilogue, or None."""
        d = self.head_dim
        if _one_token(rows):
            return _one_token(rows)
        if 2 * self.inv_freq.numel() != d:
            return "partial rotary"
        if _head_tile(d):
            return _head_tile(d)
        if n != (self.heads + 2 * self.kv_heads) * d:
            return f"{n} outputs are not q|k|v of {self.heads} + 2 x {self.kv_heads} heads of {d}"
        if raw_rows:
            return "BF12 rows kept raw (their programs tile the rows differently)"
        if self.k_cache.stride() != self.v_cache.stride() or self.k_cache.stride(-1) != 1:
            return "k_cache and v_cache need equal strides and a contiguous head_dim"
        return None


@triton.jit
def store_head(y, head, q_ptr, pos_ptr, inv_freq_ptr, k_cache_ptr, v_cache_ptr, lens_ptr, slots_ptr, offsets_ptr,
               n_rows_ptr, stride_cb, stride_ch, stride_cs, max_seq, attention_scaling,
               H, KH, HALF: tl.constexpr, HAS_SLOTS: tl.constexpr, HAS_OFFSETS: tl.constexpr,
               HAS_N_ROWS: tl.constexpr):
    """y: [2 HALF] values (act dtype) of head `head` (0 .. H + 2 KH - 1) of the q|k|v projection.
    The halves are taken as [2, HALF] rows, each half picked out by a sum with -0.0 (exact for every
    value, -0 included) rather than a permute and split of the tile."""
    act_dtype = q_ptr.dtype.element_ty
    r = tl.arange(0, 2)[:, None]
    col = r * HALF + tl.arange(0, HALF)[None, :]           # [2, HALF]: the head's columns
    halves = tl.reshape(y, (2, HALF)).to(tl.float32)
    if head < H + KH:   # q or k: rotated
        x1 = tl.sum(tl.where(r == 0, halves, -0.0), axis=0)[None, :]
        x2 = tl.sum(tl.where(r == 1, halves, -0.0), axis=0)[None, :]
        cos, sin = rope_cos_sin(tl.load(pos_ptr), inv_freq_ptr, attention_scaling, HALF, HALF, act_dtype)
        lo, hi = rotate_half(x1, x2, cos[None, :], sin[None, :], act_dtype)
        out = tl.where(r == 0, lo, hi)
    else:               # v: as computed
        out = halves.to(act_dtype)
    if head < H:
        tl.store(q_ptr + head * (2 * HALF) + col, out)
    else:
        row = tl.load(lens_ptr).to(tl.int64)
        if HAS_OFFSETS:
            row += tl.load(offsets_ptr).to(tl.int64)
        cache_b = 0
        if HAS_SLOTS:
            cache_b = tl.load(slots_ptr).to(tl.int64)
        write = row < max_seq
        if HAS_N_ROWS:
            write = write & (tl.load(n_rows_ptr) > 0)
        ok = tl.where(write, col < 2 * HALF, False)
        if head < H + KH:
            dst = k_cache_ptr + cache_b * stride_cb + (head - H) * stride_ch + row * stride_cs
        else:
            dst = v_cache_ptr + cache_b * stride_cb + (head - H - KH) * stride_ch + row * stride_cs
        tl.store(dst + col, out, mask=ok)
