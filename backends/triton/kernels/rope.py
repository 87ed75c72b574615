"""Rotary position embedding (non-interleaved halves, HF `rotate_half`), optionally fused with
the KV-cache write.

Numerics (HF Llama order, KERNEL_CONTRACTS.md): angle = float(pos) * inv_freq in fp32;
cos/sin in fp32, times `attention_scaling` (yarn/longrope; 1.0 otherwise), rounded to the
activation dtype; out = q*cos + rotate_half(q)*sin with each product and the sum rounded to the
activation dtype. For fp32 activations every rounding is exact, i.e. plain fp32 math.
With inv_freq of R/2 < D/2 entries only the first R dims rotate (partial rotary); the rest pass
through unchanged.

A token's work spreads over several programs: groups of its q heads, its k heads, its v heads (each part
computes the token's cos/sin). Positions are arbitrary (tree positions need not be contiguous).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._numerics import precise_cos, precise_sin, round_product, round_to
from ._interpreter_compat import interpreting
from .kv_cache import cache_row
from .launch_overlap import launch_dependents


@triton.jit
def rope_cos_sin(pos, inv_freq_ptr, attention_scaling, HALF: tl.constexpr, BLOCK_HALF: tl.constexpr,
                 act_dtype: tl.constexpr):
    """fp32 cos and sin [BLOCK_HALF] of position `pos` (a scalar), each rounded to act_dtype: the
    module docstring's numerics (entries past HALF are cos 1, sin 0)."""
    angle = pos.to(tl.float32) * tl.load(inv_freq_ptr + tl.arange(0, BLOCK_HALF),
                                         mask=tl.arange(0, BLOCK_HALF) < HALF, other=0.0)
    cos = round_to(precise_cos(angle) * attention_scaling, act_dtype).to(tl.float32)
    sin = round_to(precise_sin(angle) * attention_scaling, act_dtype).to(tl.float32)
    return cos, sin


@triton.jit
def rotate_half(x1, x2, c, s, act_dtype: tl.constexpr):
    """(x1 c - x2 s, x2 c + x1 s) with each product and the sum rounded to act_dtype (x1, x2: the
    fp32 values of the first and second rotated half). The products round through `round_product`: with
    plain conversions the compiler fused one product and the sum into a single bf16 fma (one rounding)."""
    lo = round_to(round_product(x1 * c, act_dtype).to(tl.float32) - round_product(x2 * s, act_dtype).to(tl.float32),
                  act_dtype)
    hi = round_to(round_product(x2 * c, act_dtype).to(tl.float32) + round_product(x1 * s, act_dtype).to(tl.float32),
                  act_dtype)
    return lo, hi


@triton.jit
def _rotate_heads(src_ptr, stride_src_h, dst_ptr, stride_dst_h, cos, sin, n_heads, store_ok,
                  HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    """dst[h, :] = rope(src[h, :]) for h < n_heads; cos/sin are [BLOCK_HALF] already rounded."""
    act_dtype = dst_ptr.dtype.element_ty
    heads = tl.arange(0, BLOCK_H)[:, None]
    cols = tl.arange(0, BLOCK_HALF)[None, :]
    ok = (heads < n_heads) & (cols < HALF)
    src = src_ptr + heads * stride_src_h + cols
    x1 = tl.load(src, mask=ok, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=ok, other=0.0).to(tl.float32)
    lo, hi = rotate_half(x1, x2, cos[None, :], sin[None, :], act_dtype)
    dst = dst_ptr + heads * stride_dst_h + cols
    tl.store(dst, lo, mask=tl.where(store_ok, ok, False))
    tl.store(dst + HALF, hi, mask=tl.where(store_ok, ok, False))


@triton.jit
def _copy_heads(src_ptr, stride_src_h, dst_ptr, stride_dst_h, n_heads, store_ok,
                COL0: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """dst[h, COL0:D] = src[h, COL0:D] for h < n_heads (BLOCK_D >= D - COL0)."""
    heads = tl.arange(0, BLOCK_H)[:, None]
    cols = COL0 + tl.arange(0, BLOCK_D)[None, :]
    ok = (heads < n_heads) & (cols < D)
    x = tl.load(src_ptr + heads * stride_src_h + cols, mask=ok, other=0.0)
    tl.store(dst_ptr + heads * stride_dst_h + cols, x.to(dst_ptr.dtype.element_ty), mask=tl.where(store_ok, ok, False))


@triton.jit
def _rope_kernel(
    q_ptr, k_ptr, v_ptr, pos_ptr, inv_freq_ptr, q_out_ptr, k_out_ptr,
    k_cache_ptr, v_cache_ptr, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr,
    stride_qn, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh,
    stride_qon, stride_qoh, stride_kon, stride_koh,
    stride_cb, stride_ch, stride_cs,
    T, max_seq, attention_scaling,
    H: tl.constexpr, KH: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_KH: tl.constexpr, BLOCK_HALF: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_TAIL: tl.constexpr,
    COPY_Q_TAIL: tl.constexpr, COPY_K_TAIL: tl.constexpr,
    WRITE_CACHE: tl.constexpr, HAS_SLOTS: tl.constexpr, HAS_OFFSETS: tl.constexpr, HAS_N_ROWS: tl.constexpr,
    SPLIT: tl.constexpr,
):
    """SPLIT: program (n, part) of token n: part < cdiv(H, BLOCK_H) rotates q heads [part * BLOCK_H, ..), the
    next part rotates the k heads (into k_out, or into the cache), and with WRITE_CACHE the last copies the v
    heads into the cache. The parts touch disjoint memory, so in-place launches stay race-free, and no part
    waits on another's loads. Not SPLIT: program n does all of token n (BLOCK_H >= H). Dims [0, 2*HALF)
    rotate; dims [2*HALF, D) pass through."""
    launch_dependents()
    n = tl.program_id(0).to(tl.int64)
    cos, sin = rope_cos_sin(tl.load(pos_ptr + n), inv_freq_ptr, attention_scaling, HALF, BLOCK_HALF,
                            q_out_ptr.dtype.element_ty)
    if SPLIT:
        _rope_part(q_ptr, k_ptr, v_ptr, q_out_ptr, k_out_ptr, k_cache_ptr, v_cache_ptr,
                   lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_qn, stride_qh, stride_kn, stride_kh,
                   stride_vn, stride_vh, stride_qon, stride_qoh, stride_kon, stride_koh, stride_cb, stride_ch,
                   stride_cs, T, max_seq, cos, sin, n, tl.program_id(1), H, KH, D, HALF, BLOCK_H,
                   BLOCK_KH, BLOCK_HALF, BLOCK_D, BLOCK_TAIL, COPY_Q_TAIL, COPY_K_TAIL, WRITE_CACHE, HAS_SLOTS,
                   HAS_OFFSETS, HAS_N_ROWS)
    else:
        for part in tl.static_range(2 + WRITE_CACHE):
            _rope_part(q_ptr, k_ptr, v_ptr, q_out_ptr, k_out_ptr, k_cache_ptr, v_cache_ptr,
                       lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_qn, stride_qh, stride_kn, stride_kh,
                       stride_vn, stride_vh, stride_qon, stride_qoh, stride_kon, stride_koh, stride_cb, stride_ch,
                       stride_cs, T, max_seq, cos, sin, n, part, H, KH, D, HALF, BLOCK_H,
                       BLOCK_KH, BLOCK_HALF, BLOCK_D, BLOCK_TAIL, COPY_Q_TAIL, COPY_K_TAIL, WRITE_CACHE, HAS_SLOTS,
                       HAS_OFFSETS, HAS_N_ROWS)


@triton.jit
def _rope_part(q_ptr, k_ptr, v_ptr, q_out_ptr, k_out_ptr,
               k_cache_ptr, v_cache_ptr, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr,
               stride_qn, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh,
               stride_qon, stride_qoh, stride_kon, stride_koh,
               stride_cb, stride_ch, stride_cs,
               T, max_seq, cos, sin, n, part,
               H: tl.constexpr, KH: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr,
               BLOCK_H: tl.constexpr, BLOCK_KH: tl.constexpr, BLOCK_HALF: tl.constexpr,
               BLOCK_D: tl.constexpr, BLOCK_TAIL: tl.constexpr,
               COPY_Q_TAIL: tl.constexpr, COPY_K_TAIL: tl.constexpr,
               WRITE_CACHE: tl.constexpr, HAS_SLOTS: tl.constexpr, HAS_OFFSETS: tl.constexpr,
               HAS_N_ROWS: tl.constexpr):
    """Part `part` of token n (the kernel's docstring), with the token's cos and sin."""
    q_parts = (H + BLOCK_H - 1) // BLOCK_H
    if part < q_parts:
        h0 = part * BLOCK_H
        q_src = q_ptr + n * stride_qn + h0 * stride_qh
        q_dst = q_out_ptr + n * stride_qon + h0 * stride_qoh
        _rotate_heads(q_src, stride_qh, q_dst, stride_qoh, cos, sin, H - h0, True, HALF, BLOCK_H, BLOCK_HALF)
        if COPY_Q_TAIL:
            _copy_heads(q_src, stride_qh, q_dst, stride_qoh, H - h0, True, 2 * HALF, D, BLOCK_H, BLOCK_TAIL)
    elif part == q_parts:
        k_src = k_ptr + n * stride_kn
        if WRITE_CACHE:
            dst, in_cache = cache_row(n, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_cb, stride_cs, T,
                                      max_seq, HAS_SLOTS, HAS_OFFSETS, HAS_N_ROWS)
            _rotate_heads(k_src, stride_kh, k_cache_ptr + dst, stride_ch, cos, sin, KH, in_cache, HALF, BLOCK_KH,
                          BLOCK_HALF)
            if COPY_K_TAIL:
                _copy_heads(k_src, stride_kh, k_cache_ptr + dst, stride_ch, KH, in_cache, 2 * HALF, D, BLOCK_KH,
                            BLOCK_TAIL)
        else:
            k_dst = k_out_ptr + n * stride_kon
            _rotate_heads(k_src, stride_kh, k_dst, stride_koh, cos, sin, KH, True, HALF, BLOCK_KH, BLOCK_HALF)
            if COPY_K_TAIL:
                _copy_heads(k_src, stride_kh, k_dst, stride_koh, KH, True, 2 * HALF, D, BLOCK_KH, BLOCK_TAIL)
    elif WRITE_CACHE:
        dst, in_cache = cache_row(n, lens_ptr, slots_ptr, offsets_ptr, n_rows_ptr, stride_cb, stride_cs, T,
                                  max_seq, HAS_SLOTS, HAS_OFFSETS, HAS_N_ROWS)
        _copy_heads(v_ptr + n * stride_vn, stride_vh, v_cache_ptr + dst, stride_ch, KH, in_cache, 0, D, BLOCK_KH,
                    BLOCK_D)


# q heads a program rotates when a token's heads spread over several programs (split_heads): one program a token
# left a launch of a few rows, a drafter level's or a verify's, latency-bound on one dependent load-store chain a
# token. The interpreter runs one program a token (its cost is per program, and each part computes cos/sin again);
# both layouts write the same bits (tests/triton/test_triton_rope.py runs both).
Q_HEADS_PER_PROGRAM = 8


def _tokens(x: torch.Tensor, name: str) -> torch.Tensor:
    """[..., heads, D] -> [N, heads, D] view with a unit last stride (no copy)."""
    if x.dim() < 3 or x.stride(-1) != 1:
        raise ValueError(f"{name} must be [..., heads, head_dim] with a contiguous last dim")
    return x.view(-1, x.shape[-2], x.shape[-1])


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr() and a.stride() == b.stride()


def _launch(q, k, v, pos, inv_freq, q_out, k_out, attention_scaling,
            k_cache=None, v_cache=None, lens=None, tokens_per_request=1, slots=None, offsets=None, n_rows=None,
            split_heads=None):
    q3, k3, q_out3 = _tokens(q, "q"), _tokens(k, "k"), _tokens(q_out, "q_out")
    n, heads, d = q3.shape
    kv_heads = k3.shape[1]
    half = inv_freq.numel()
    if k3.shape[0] != n or k3.shape[2] != d or not 0 < 2 * half <= d:
        raise ValueError(f"bad shapes q {tuple(q.shape)} k {tuple(k.shape)} inv_freq {tuple(inv_freq.shape)}")
    pos_flat = pos.reshape(-1)
    if pos_flat.numel() != n:
        raise ValueError(f"pos has {pos_flat.numel()} entries for {n} tokens")
    if n == 0:
        return
    partial = 2 * half < d
    write_cache = k_cache is not None
    if write_cache:
        v3 = _tokens(v, "v")
        k_out3 = k3  # unused
        if k_cache.stride() != v_cache.stride() or k_cache.stride(-1) != 1:
            raise ValueError("k_cache and v_cache need equal strides and a contiguous head_dim")
        cache_strides = k_cache.stride()[:3]
        max_seq = k_cache.shape[2]
        copy_k_tail = partial
    else:
        v3, k_out3 = k3, _tokens(k_out, "k_out")
        k_cache = v_cache = lens = q3
        cache_strides, max_seq = (0, 0, 0), 0
        copy_k_tail = partial and not _same_memory(k3, k_out3)
    if split_heads is None:
        split_heads = not interpreting()
    block_h = triton.next_power_of_2(heads)
    if split_heads:
        block_h = min(block_h, Q_HEADS_PER_PROGRAM)
    parts = triton.cdiv(heads, block_h) + 1 + int(write_cache) if split_heads else 1
    _rope_kernel[(n, parts)](
        q3, k3, v3, pos_flat.contiguous(), inv_freq.contiguous(), q_out3, k_out3,
        k_cache, v_cache, lens, lens if slots is None else slots, lens if offsets is None else offsets,
        lens if n_rows is None else n_rows,
        q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1), v3.stride(0), v3.stride(1),
        q_out3.stride(0), q_out3.stride(1), k_out3.stride(0), k_out3.stride(1),
        *cache_strides,
        tokens_per_request, max_seq, float(attention_scaling),
        H=heads, KH=kv_heads, D=d, HALF=half,
        BLOCK_H=block_h, BLOCK_KH=triton.next_power_of_2(kv_heads),
        BLOCK_HALF=triton.next_power_of_2(half), BLOCK_D=triton.next_power_of_2(d),
        BLOCK_TAIL=triton.next_power_of_2(max(d - 2 * half, 1)),
        COPY_Q_TAIL=partial and not _same_memory(q3, q_out3), COPY_K_TAIL=copy_k_tail,
        WRITE_CACHE=write_cache, HAS_SLOTS=slots is not None, HAS_OFFSETS=offsets is not None,
        HAS_N_ROWS=n_rows is not None, SPLIT=split_heads, num_warps=4,
    )


def rope(q, k, pos, inv_freq, attention_scaling: float = 1.0, *, inplace: bool = False, q_out=None, k_out=None,
         split_heads=None):
    """Rotate q [..., H, D] and k [..., KH, D] at positions pos [...] (int, one per token).

    inv_freq: [R/2] fp32; the first R <= D dims rotate (R < D: partial rotary), the rest pass
    through. Returns (q_out, k_out); `inplace=True` writes into q and k (same as passing
    q_out=q, k_out=k). Token and head strides may be arbitrary (e.g. views of a fused qkv
    projection); the last dim must be contiguous."""
    if inplace:
        q_out, k_out = q, k
    q_out = torch.empty_like(q) if q_out is None else q_out
    k_out = torch.empty_like(k) if k_out is None else k_out
    _launch(q, k, None, pos, inv_freq, q_out, k_out, attention_scaling, split_heads=split_heads)
    return q_out, k_out


def rope_kv_write(q, k, v, pos, inv_freq, k_cache, v_cache, lens, attention_scaling: float = 1.0, *,
                  q_out=None, slots=None, offsets=None, n_rows=None, split_heads=None):
    """Rope on q (into q_out; q_out=q for in place) and on k, and the contract's kv_write of the
    rotated k and of v in the same launch: token t of request b goes to cache row
    lens[b] + offsets[b] + t of cache slot slots[b] (offsets default 0, slots default b).

    q [B, T, H, D], k/v [B, T, KH, D], pos [B, T], caches [slots, KH, max_seq, D], lens [B].
    Rows >= max_seq are skipped; with n_rows (a one-element int tensor on the device: a packed
    forward's real rows, ForwardInputs.row_start[-1:]) so are tokens b * T + t >= n_rows[0] (pad
    rows; q is still rotated). Returns q_out."""
    if pos.dim() != 2:
        raise ValueError("pos must be [B, T]")
    q_out = torch.empty_like(q) if q_out is None else q_out
    _launch(q, k, v, pos, inv_freq, q_out, None, attention_scaling,
            k_cache, v_cache, lens, pos.shape[1], slots, offsets, n_rows, split_heads)
    return q_out
