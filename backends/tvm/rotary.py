"""Rotary position embedding of q and k at arbitrary positions (non-interleaved halves, HF
`rotate_half`), both in one call.

Numerics (KERNEL_CONTRACTS.md, HF Llama order): angle = float(pos) * inv_freq in fp32; cos and
sin in fp32 (libm), times `attention_scaling`, rounded to the activation dtype;
out = x*cos + rotate_half(x)*sin with each product and the sum rounded to the activation dtype
(for fp32 activations that is plain fp32 math). inv_freq [D/2] comes from the importer's
rope-scaling rule, so every scaling variant is the same kernel.

One task per token (parallel when the call is big enough): cos/sin of its D/2 angles once, then every q head and every k head,
vectorised along D/2. q and k may be strided views (e.g. slices of a fused qkv projection:
token and head strides are runtime values); the outputs are new contiguous tensors unless
`q_out`/`k_out` are given (strided too; they may be q and k themselves: each vector of both
halves is loaded before either is stored, so the rotation is safe in place). Tokens symbolic.
"""

from __future__ import annotations

import torch

from .alignment import aligned, is_aligned
from .host_target import parallel_rows

_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}


def build_rotary(heads: int, kv_heads: int, head_dim: int, act: str, lanes: int, parallel: bool):
    """PrimFunc `(q[n, H, D], k[n, KH, D], pos[n], inv_freq[D/2], q_out, k_out, scaling)`;
    every q/k buffer with symbolic token/head strides."""
    from tvm.script import tirx as T

    from .numerics import round_to

    rows_loop = T.parallel if parallel else T.serial

    half = head_dim // 2
    blocks = half // lanes

    def f32(e):
        return T.Cast("float32", e)

    def rot_lo(x1, x2, c, s):
        return T.Cast(act, round_to(act, x1 * c) - round_to(act, x2 * s))

    def rot_hi(x1, x2, c, s):
        return T.Cast(act, round_to(act, x2 * c) + round_to(act, x1 * s))

    @T.prim_func
    def rotary(var_q: T.handle, var_k: T.handle, var_pos: T.handle, var_inv: T.handle,
               var_qo: T.handle, var_ko: T.handle, scaling: T.float32):
        # no "noalias": q_out may be q (in-place rotation)
        n = T.int32()  # int32 sizes: TVM 0.27 binds symbolic strides only as int32
        qs0 = T.int32()
        qs1 = T.int32()
        ks0 = T.int32()
        ks1 = T.int32()
        qo0 = T.int32()
        qo1 = T.int32()
        ko0 = T.int32()
        ko1 = T.int32()
        q = T.match_buffer(var_q, (n, heads, head_dim), act, strides=(qs0, qs1, 1))
        k = T.match_buffer(var_k, (n, kv_heads, head_dim), act, strides=(ks0, ks1, 1))
        pos = T.match_buffer(var_pos, (n,), "int64")
        inv_freq = T.match_buffer(var_inv, (half,), "float32")
        q_out = T.match_buffer(var_qo, (n, heads, head_dim), act, strides=(qo0, qo1, 1))
        k_out = T.match_buffer(var_ko, (n, kv_heads, head_dim), act, strides=(ko0, ko1, 1))
        for t in rows_loop(n):
            cs = T.alloc_buffer((2, half), "float32", scope="local")
            xs = T.alloc_buffer((2, lanes), "float32", scope="local")
            for i in range(half):
                cs[0, i] = round_to(act, T.cos(f32(pos[t]) * inv_freq[i]) * scaling)
                cs[1, i] = round_to(act, T.sin(f32(pos[t]) * inv_freq[i]) * scaling)
            for h in range(heads):
                for blk in range(blocks):
                    for lane in T.vectorized(lanes):  # load both halves before storing: q_out may be q
                        xs[0, lane] = f32(q[t, h, blk * lanes + lane])
                        xs[1, lane] = f32(q[t, h, half + blk * lanes + lane])
                    for lane in T.vectorized(lanes):
                        q_out[t, h, blk * lanes + lane] = rot_lo(
                            xs[0, lane], xs[1, lane], cs[0, blk * lanes + lane], cs[1, blk * lanes + lane])
                        q_out[t, h, half + blk * lanes + lane] = rot_hi(
                            xs[0, lane], xs[1, lane], cs[0, blk * lanes + lane], cs[1, blk * lanes + lane])
            for h in range(kv_heads):
                for blk in range(blocks):
                    for lane in T.vectorized(lanes):
                        xs[0, lane] = f32(k[t, h, blk * lanes + lane])
                        xs[1, lane] = f32(k[t, h, half + blk * lanes + lane])
                    for lane in T.vectorized(lanes):
                        k_out[t, h, blk * lanes + lane] = rot_lo(
                            xs[0, lane], xs[1, lane], cs[0, blk * lanes + lane], cs[1, blk * lanes + lane])
                        k_out[t, h, half + blk * lanes + lane] = rot_hi(
                            xs[0, lane], xs[1, lane], cs[0, blk * lanes + lane], cs[1, blk * lanes + lane])

    return rotary


def _rows(x: torch.Tensor, output: bool = False) -> torch.Tensor:
    """x [..., heads, D] as [n, heads, D] without copying when the last dim is contiguous
    (inputs are copied otherwise, and when they are not 64-byte aligned: alignment.py; an output
    that cannot be viewed so, or is not aligned, is an error)."""
    try:
        if x.stride(-1) == 1 and (output or is_aligned(x)):
            rows = x.view(-1, x.shape[-2], x.shape[-1])
            if output and not is_aligned(rows):
                raise ValueError("rotary: q_out/k_out must start 64-byte aligned")
            return rows
    except RuntimeError:
        pass
    if output:
        raise ValueError("rotary: q_out/k_out need a contiguous last dim and flattenable leading dims")
    return aligned(x.reshape(-1, x.shape[-2], x.shape[-1]).contiguous())


def rotary(cache, q: torch.Tensor, k: torch.Tensor | None, pos: torch.Tensor, inv_freq: torch.Tensor,
           attention_scaling: float = 1.0, *, q_out: torch.Tensor | None = None,
           k_out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Rotate q [..., H, D] and k [..., KH, D] at positions pos [...] (int64, absolute).
    Returns (q_rot, k_rot) with the shapes of q and k. `k = None` rotates q alone (a kernel
    with no kv heads; returns (q_rot, None))."""
    heads, head_dim = q.shape[-2:]
    kv_heads = 0 if k is None else k.shape[-2]
    if head_dim % 2 or (k is not None and k.shape[-1] != head_dim) or inv_freq.shape != (head_dim // 2,):
        raise ValueError(f"rotary: q {tuple(q.shape)}, k {None if k is None else tuple(k.shape)}, "
                         f"inv_freq {tuple(inv_freq.shape)}")
    act = _DTYPES[q.dtype]
    half = head_dim // 2
    lanes = next(v for v in (cache.host.fp32_lanes, 8, 4, 2, 1) if half % v == 0)
    parallel = parallel_rows(pos.numel(), (heads + kv_heads) * head_dim)
    params = {"heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "act": act, "lanes": lanes,
              "parallel": parallel}
    fn = cache.get("rotary", params, lambda: build_rotary(heads, kv_heads, head_dim, act, lanes, parallel))
    q_out = q_out if q_out is not None else torch.empty(q.shape, dtype=q.dtype)
    q_rows = _rows(q)
    if k is None:
        k_rows = k_out_rows = q.new_empty(q_rows.shape[0], 0, head_dim)
    else:
        k_out = k_out if k_out is not None else torch.empty(k.shape, dtype=k.dtype)
        k_rows, k_out_rows = _rows(k), _rows(k_out, output=True)
    fn(q_rows, k_rows, pos.reshape(-1).to(torch.int64).contiguous(), inv_freq.float().contiguous(),
       _rows(q_out, output=True), k_out_rows, float(attention_scaling))
    return q_out, k_out
