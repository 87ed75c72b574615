"""Linear layers on Triton: `y[M, N] = x[M, K] @ w[N, K]^T (+ bias[N])` for bf16 and BF12 weights.

`linear_bf16(x, w, bias)` and `linear_bf12(x, packed, bias)` share one kernel source
(`linear_kernels`) and one configuration per (M, N, K) (`linear_config.choose`), so for the same
x they return the same bits whenever `unpack(packed) == w`. Output dtype = x.dtype; any leading
dims of x; any N and K (ragged K is masked). M = 1 runs the GEMV, M > 1 the skinny GEMM.
BF12 rows kept raw (see docs/BF12.md) go through the bf16 kernel in a second launch with the
same configuration, which computes each row exactly as the bf16 launch over the whole matrix does.

SwiGLU prologue: `linear_bf16(gate, w, bias, up=up)` (and `linear_bf12`) compute
`silu_mul(gate, up) @ w^T (+ bias)` in one launch, x computed in the kernel where it would be
loaded (linear_kernels.py); the bits are those of `activation.silu_mul` followed by the same call
without `up` (same configuration), and nothing of shape [M, K] is written.

RMSNorm prologue: `linear_bf16(h, w, bias, norm=(norm_weight, eps))` computes
`rms_norm(h, norm_weight, eps) @ w^T (+ bias)` in one launch, with the bits of
norm.rms_norm(..., fixed_order=True) followed by the plain call (both sum squares in _rms.py's
order). Residual epilogue: `residual=r` (out's shape) returns `r + (x @ w^T + bias)`, with the
bits of add_kernel applied to the plain call's output and r; it combines with either prologue.
`up` and `norm` exclude each other.
"""
from __future__ import annotations

import torch
import triton

from specir.bf12 import BF12Matrix

from ._device import sm_count
from ._interpreter_compat import interpreting
from ._rms import chunks
from .linear_config import WEIGHT_CACHE, LinearConfig, choose, head_tiles
from .launch_overlap import overlap_available
from .linear_kernels import PRO_NONE, PRO_RMS_NORM, PRO_SWIGLU, gemm_kernel, gemv_kernel
from .rope_kv_epilogue import RopeKV

_SM_REGISTERS = 65536  # 32-bit registers per SM (sm_80 .. sm_90): the persistent grid's programs share them

_FORMATS = {"bf16": 0, "bf12": 1}
_counters: dict[torch.device, torch.Tensor] = {}
_retired: list[torch.Tensor] = []  # outgrown counter buffers stay alive: captured graphs may point at them


def _counter_buffer(device: torch.device, size: int) -> torch.Tensor:
    """Zeroed int32 split-K arrival counters; kernels leave them zeroed after use. Allocated
    once per device with room for 65536 tiles, so that a call inside CUDA-graph capture (after
    one eager warm-up call) never allocates. Kernels sharing it must run on one stream. An
    outgrown buffer is retired, not freed: graphs captured before still point at it."""
    buf = _counters.get(device)
    if buf is None or buf.numel() < size:
        if buf is not None:
            _retired.append(buf)
        buf = torch.zeros(max(size, 65536), dtype=torch.int32, device=device)
        _counters[device] = buf
    return buf


def _as_rows(x: torch.Tensor, k: int) -> torch.Tensor:
    if x.shape[-1] != k:
        raise ValueError(f"x has {x.shape[-1]} features, the weight expects {k}")
    x2 = x.reshape(-1, k)
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def _output(x: torch.Tensor, n: int, out: torch.Tensor | None) -> torch.Tensor:
    shape = (*x.shape[:-1], n)
    if out is None:
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    if tuple(out.shape) != shape or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {x.dtype} tensor of shape {shape}")
    return out


def _launch(fmt: str, cfg: LinearConfig, x2, y2, bias, k: int, rows_in: int, *, w=None, packed_planes=None,
            rows=None, raw=None, raw_rows=None, up2=None, norm=None, res2=None, overlap=False, rope_kv=None):
    """Run one kernel over `rows_in` weight rows (bf16 `w` or BF12 planes), writing y2[:, rows].
    With `raw`/`raw_rows` (BF12 GEMV, cfg.fuse_raw) the same launch also computes the raw bf16 rows.
    With `up2` the kernel's input is swiglu(x2, up2) (the SwiGLU prologue); with `norm` (weight,
    eps) it is rms_norm(x2) (the RMSNorm prologue); with `res2` the output is res2 + the product.
    With `overlap` (where the device allows it) the launch asks for `launch_pdl` (launch_overlap.py).
    With `rope_kv` (a RopeKV the caller checked) the GEMV's epilogue does the rope and KV write: one
    program per head (block_n = head_dim, order-neutral), y2 receives q's rotated heads only."""
    if rope_kv is not None:
        if cfg.kind != "gemv":
            raise ValueError(f"the rope + KV write runs in the GEMV's epilogue; this call's config is a {cfg.kind}")
        cfg = head_tiles(cfg, rope_kv.head_dim)
    m = x2.shape[0]
    swiglu = up2 is not None
    pro = PRO_SWIGLU if swiglu else (PRO_RMS_NORM if norm is not None else PRO_NONE)
    if norm is not None:
        up2, eps = norm[0], float(norm[1])   # the weight rides where up would (row stride 0)
    else:
        eps = 0.0
    up_stride = up2.stride(0) if swiglu else 0
    res_stride = res2.stride(0) if res2 is not None else 0
    if max(m * y2.stride(0), m * x2.stride(0), m * up_stride, m * res_stride) >= 2 ** 31:
        raise ValueError(f"a {m}-row linear with {y2.shape[1]} outputs overflows the kernels' int32 row offsets; "
                         "split the rows into smaller launches")
    groups_total = -(-k // 128)
    n_iters = -(-groups_total // cfg.groups)
    n_full = k // (128 * cfg.groups)
    per_split = -(-n_iters // cfg.split)
    blocks_n = triton.cdiv(rows_in, cfg.block_n)
    blocks_m = triton.cdiv(m, cfg.block_m) if cfg.kind == "gemm" else 1
    r_raw = raw.shape[0] if raw is not None else 0
    blocks_raw = triton.cdiv(r_raw, cfg.block_n)
    dummy = y2
    if fmt == "bf12":
        mant, code, base, esc = packed_planes
        w_arg, stride_w, words = dummy, 0, True
        planes = (mant.view(torch.int64), code.view(torch.int32), base, esc)
    else:
        planes = (dummy, dummy, dummy, dummy)
        words = k % 2 == 0 and w.data_ptr() % 4 == 0 and cfg.kind == "gemv"
        if cfg.kind == "gemm":
            w_arg, stride_w = w, w.stride(0)
        elif words:
            w_arg, stride_w = w.view(torch.int32), k // 2
        else:
            w_arg, stride_w = w.view(torch.int16), w.stride(0)
    ws_rows = rows_in + r_raw
    ws = torch.empty(cfg.split * m * ws_rows if cfg.split > 1 else 1, dtype=torch.float32, device=x2.device)
    cnt = _counter_buffer(x2.device, (blocks_n + blocks_raw) * blocks_m)
    common = dict(FORMAT=_FORMATS[fmt], BN=cfg.block_n, G=cfg.groups, SPLIT=cfg.split,
                  HAS_BIAS=bias is not None, HAS_ROWS=rows is not None, PRO=pro,
                  NORM_NCH=chunks(k) if norm is not None else 1, RESIDUAL=res2 is not None,
                  PRMT=cfg.prmt and not interpreting(),
                  num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    maxnreg = cfg.maxnreg
    if cfg.kind == "gemv" and cfg.persistent and not maxnreg:
        # the persistent loop takes 200-230 registers uncapped (compile_check): capped so that `persistent` programs
        # fit on an SM at once, without spills at 4 x 4 warps (128)
        maxnreg = min(255, _SM_REGISTERS // (cfg.persistent * cfg.num_warps * 32) // 8 * 8)
    if maxnreg and not interpreting():
        common["maxnreg"] = maxnreg
    if rope_kv is not None:
        common.update(ROPE_KV=True, HAS_SLOTS=rope_kv.slots is not None, HAS_OFFSETS=rope_kv.offsets is not None,
                      HAS_N_ROWS=rope_kv.n_rows is not None)
    if overlap and overlap_available(x2.device):
        common.update(PDL=True, launch_pdl=True)
        if cfg.kind == "gemv":
            common["PDL_ITERS"] = cfg.overlap_iters
    bias_arg = bias if bias is not None else dummy
    rows_arg = rows if rows is not None else dummy
    res_arg = res2 if res2 is not None else dummy
    if cfg.kind == "gemv":
        x_pairs = (x2.dtype == torch.bfloat16 and k % 2 == 0 and x2.data_ptr() % 4 == 0
                   and (up2 is None or (up2.dtype == x2.dtype and up2.data_ptr() % 4 == 0)))
        prefetch = cfg.prefetch and x_pairs
        up_arg = (up2.view(torch.int32) if x_pairs else up2) if up2 is not None else dummy
        grid = (blocks_n + blocks_raw, cfg.split)
        if cfg.persistent:
            common.update(n_blocks=grid[0], PERSISTENT=True)
            per_sm = min(cfg.persistent, _SM_REGISTERS // (maxnreg * cfg.num_warps * 32)) if maxnreg else cfg.persistent
            grid = (min(grid[0] * cfg.split, max(per_sm, 1) * sm_count(x2.device)), 1)
        gemv_kernel[grid](
            x2.view(torch.int32) if x_pairs else x2, up_arg, y2, bias_arg, w_arg, *planes, rows_arg, ws, cnt,
            raw.view(torch.int32) if r_raw else dummy, raw_rows if r_raw else dummy, res_arg,
            rows_in, k, stride_w, groups_total, n_iters, n_full, per_split, r_raw, blocks_n, eps,
            *_rope_kv_args(rope_kv, dummy),
            WORDS=words, X_PAIRS=x_pairs, PREFETCH=prefetch and (words or fmt == "bf12"),
            X_LATE=cfg.x_late, DEPTH=cfg.depth, FUSE_RAW=r_raw > 0, RAW_PREFETCH=prefetch,
            WCACHE=WEIGHT_CACHE[cfg.weight_cache], **common)
    else:
        dot_bf16 = x2.dtype == torch.bfloat16 and not interpreting()
        m_fastest = cfg.m_fastest and blocks_m > 1 and blocks_n < 65536  # the grid's z extent is at most 65535
        grid = (blocks_m, cfg.split, blocks_n) if m_fastest else (blocks_n, cfg.split, blocks_m)
        gemm_kernel[grid](
            x2, up2 if up2 is not None else dummy, y2, bias_arg, w_arg, *planes, rows_arg, ws, cnt, res_arg,
            m, rows_in, k, x2.stride(0), up_stride, y2.stride(0), res_stride, stride_w, groups_total, n_iters,
            n_full, per_split, eps, BM=cfg.block_m, DOT_BF16=dot_bf16, SWAP=cfg.swap_ab, M_FASTEST=m_fastest,
            **common)


def _rope_kv_args(r, dummy) -> list:
    """gemv_kernel's rope + KV-write arguments, from pos_ptr to KH (dummies without `r`)."""
    if r is None:
        return [dummy] * 8 + [0, 0, 0, 0, 1.0, 0, 0]
    return [r.pos.reshape(-1), r.inv_freq, r.k_cache, r.v_cache, r.lens,
            dummy if r.slots is None else r.slots, dummy if r.offsets is None else r.offsets,
            dummy if r.n_rows is None else r.n_rows, *r.k_cache.stride()[:3], r.k_cache.shape[2],
            float(r.attention_scaling), r.heads, r.kv_heads]


def _fusable_raw(cfg: LinearConfig, packed: BF12Matrix, k: int) -> bool:
    """Raw rows can ride in the BF12 GEMV launch when they are read as pair words (even K, 4-byte
    aligned) and both formats use the same GEMV configuration's order fields (always: `choose`)."""
    return (cfg.kind == "gemv" and cfg.fuse_raw and packed.raw_row_count > 0 and packed.packed_rows > 0
            and k % 2 == 0 and packed.raw.data_ptr() % 4 == 0)


def _rows_beside(t: torch.Tensor | None, like: torch.Tensor, k: int, what: str) -> torch.Tensor | None:
    """`t` as [M, k] rows, checked to have `like`'s shape, dtype and device (`what` names both in
    the error: the SwiGLU prologue's up beside the gate, the residual beside the output), or None."""
    if t is None:
        return None
    if t.shape != like.shape or t.dtype != like.dtype or t.device != like.device:
        raise ValueError(f"{what}: {tuple(like.shape)} {like.dtype} on {like.device}, "
                         f"got {tuple(t.shape)} {t.dtype} on {t.device}")
    return _as_rows(t, k)


def _norm_arg(x: torch.Tensor, up, norm, k: int):
    """The RMSNorm prologue's (weight, eps), checked, or None."""
    if norm is None:
        return None
    if up is not None:
        raise ValueError("a linear takes one prologue: `up` (SwiGLU) or `norm` (RMSNorm), not both")
    weight, eps = norm
    if weight.shape != (k,) or weight.device != x.device:
        raise ValueError(f"the norm weight must have shape ({k},) on {x.device}, got {tuple(weight.shape)}")
    return weight.contiguous(), float(eps)


def _check_rope_kv(rope_kv, rows: int, n: int, raw_rows: int, res2) -> None:
    if rope_kv is None:
        return
    why = rope_kv.why_not_fused(rows, n, raw_rows) or ("a residual epilogue too" if res2 is not None else None)
    if why:
        raise ValueError(f"the rope + KV write cannot run in this linear's epilogue: {why}; "
                         "run the linear, then rope.rope_kv_write")


def _check_bias(bias, n, device):
    if bias is not None and (bias.shape != (n,) or bias.device != device):
        raise ValueError(f"bias must have shape ({n},) on {device}")
    return None if bias is None else bias.contiguous()


def linear_bf16(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, *,
                out: torch.Tensor | None = None, config: LinearConfig | None = None,
                up: torch.Tensor | None = None, norm: tuple | None = None,
                residual: torch.Tensor | None = None, overlap: bool = False,
                rope_kv: RopeKV | None = None) -> torch.Tensor:
    """y = x @ w^T (+ bias), w bf16 [N, K] row-major; fp32 accumulation; returns x.dtype.
    With `up` (x's shape and dtype): y = silu_mul(x, up) @ w^T (+ bias), the SwiGLU prologue;
    with `norm=(weight, eps)`: y = rms_norm(x) @ w^T (+ bias); with `residual`: y = residual + ...
    `overlap`: start while the launch before drains (launch_overlap.py; same bits).
    `rope_kv` (one token, y = q|k|v): y's q columns get rope(q), the KV cache rope(k) and v, the
    bits of this call without it then rope.rope_kv_write (rope_kv_epilogue.py); y's k and v
    columns are not written. ValueError where `rope_kv.why_not_fused` says why not."""
    if w.dim() != 2 or w.dtype != torch.bfloat16:
        raise ValueError(f"w must be a 2-D bf16 matrix, got {tuple(w.shape)} {w.dtype}")
    n, k = w.shape
    w = w if w.stride(1) == 1 else w.contiguous()
    x2, up2, norm = _as_rows(x, k), _rows_beside(up, x, k, "up must match the gate"), _norm_arg(x, up, norm, k)
    y = _output(x, n, out)
    bias, res2 = _check_bias(bias, n, x.device), _rows_beside(residual, y, n, "the residual must match the output")
    if y.numel() == 0:
        return y
    _check_rope_kv(rope_kv, x2.shape[0], n, 0, res2)
    cfg = config or choose(x2.shape[0], n, k, "bf16")
    _launch("bf16", cfg, x2, y.view(-1, n), bias, k, n, w=w, up2=up2, norm=norm, res2=res2, overlap=overlap,
            rope_kv=rope_kv)
    return y


def linear_bf12(x: torch.Tensor, packed: BF12Matrix, bias: torch.Tensor | None = None, *,
                out: torch.Tensor | None = None, config: LinearConfig | None = None,
                up: torch.Tensor | None = None, norm: tuple | None = None,
                residual: torch.Tensor | None = None, overlap: bool = False,
                rope_kv: RopeKV | None = None) -> torch.Tensor:
    """y = x @ unpack(packed)^T (+ bias), decoding inside the kernel; same bits as `linear_bf16`
    (with `up`, `norm`, `residual`, `overlap` and `rope_kv` too)."""
    n, k = packed.shape
    if packed.device != x.device:
        raise ValueError(f"packed weights are on {packed.device}, x on {x.device}")
    x2, up2, norm = _as_rows(x, k), _rows_beside(up, x, k, "up must match the gate"), _norm_arg(x, up, norm, k)
    y = _output(x, n, out)
    bias, res2 = _check_bias(bias, n, x.device), _rows_beside(residual, y, n, "the residual must match the output")
    if y.numel() == 0:
        return y
    _check_rope_kv(rope_kv, x2.shape[0], n, packed.raw_row_count, res2)
    cfg = config or choose(x2.shape[0], n, k, "bf12")
    y2 = y.view(-1, n)
    raw_cfg = config or choose(x2.shape[0], n, k, "bf16")
    if _fusable_raw(cfg, packed, k) and raw_cfg.order_key() == cfg.order_key():
        _launch("bf12", cfg, x2, y2, bias, k, packed.packed_rows,
                packed_planes=(packed.mant, packed.code, packed.base, packed.esc), rows=packed.rows,
                raw=packed.raw, raw_rows=packed.raw_rows, up2=up2, norm=norm, res2=res2, overlap=overlap)
        return y
    if packed.packed_rows:
        _launch("bf12", cfg, x2, y2, bias, k, packed.packed_rows,
                packed_planes=(packed.mant, packed.code, packed.base, packed.esc), rows=packed.rows, up2=up2,
                norm=norm, res2=res2, overlap=overlap, rope_kv=rope_kv)
    if packed.raw_row_count:
        _launch("bf16", raw_cfg, x2, y2, bias, k, packed.raw_row_count, w=packed.raw, rows=packed.raw_rows,
                up2=up2, norm=norm, res2=res2, overlap=overlap)
    return y
