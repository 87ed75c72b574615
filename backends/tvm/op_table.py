"""The TVM backend's kernel table for the runtime: op name -> `fn(params, state, *inputs)`, the
contract of `specir.backends.reference.ops` (activations [B, T, width], a ForwardState), with
the CPU kernels of `kernels.CPUKernels` doing the work.

| op            | runs as                                                                      |
| linear        | TVM linear (GEMV tile for one row, register tile for more)                  |
| packed_linear | BF12 decoded once to bf16 (kept in params), then the TVM linear: the bits of |
|               | `linear` over the unpacked weight; no in-kernel decode yet                   |
| rms_norm      | TVM rms_norm; `group` (per-head qk-norm) reshapes rows to [-1, group]        |
| rope          | TVM rotary on q or k alone; inv_freq and attention factor from the op's     |
|               | rope table; partial rotary rotates the first dims of a copy in place         |
| swiglu        | TVM silu_mul                                                                 |
| attention     | KV write in torch, then TVM attention with the runtime's cache slots,        |
|               | scratch offsets and [B, T, U] mask (causal masks use the unmasked kernel);   |
|               | ops with a sliding `window` (or head_dim not a multiple of 4) run the torch  |
|               | reference kernel                                                             |
| embed, add    | torch (the reference kernels)                                                |
| recurrent ops | torch: conv1d, gated_delta_rule and mamba2_scan (and the hybrid families'    |
| and hybrid    | stateless ops: rms_norm_1p, rms_norm_gated, slice, concat, scale, activation, |
| ops           | mul, vocab_scatter) run the reference kernels (reference/{recurrent,hybrid}.py) |
Activations other than bf16/fp32 (f16) run the reference kernel of the op.

Weights and biases reach the kernels 64-byte aligned (alignment.py): a weight memory-mapped
from the checkpoint at an unaligned offset (float32 checkpoints) is copied once, into its op's
params, on first use.

Per forward, `_forward_info(state)` derives once what every attention layer shares (lens,
offsets, slots as int32, whether the mask is causal) and sizes TVM's thread pool to torch's
(the engine picks the thread count; one thread makes every kernel call serial).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specir.backends.reference import ops as ref

from .alignment import aligned, is_aligned
from .host_target import set_threads

_TVM_DTYPES = (torch.bfloat16, torch.float32)


@dataclass
class _ForwardInfo:
    lens: torch.Tensor  # [B] int32 committed rows
    offsets: torch.Tensor  # [B] int32 scratch rows before the new tokens
    slots: torch.Tensor  # [B] int32 cache slots
    slot_list: list[int]
    start_list: list[int]  # first row written per request
    any_offset: bool
    causal: dict  # id(mask) -> bool


def _forward_info(state) -> _ForwardInfo:
    info = state.scratch.get("tvm")
    if info is None:
        set_threads(torch.get_num_threads())
        slot_list = [int(s) for s in state.slots.tolist()]
        start_list = [int(s) for s in state.write_start.tolist()]
        lens = state.lens.to(torch.int32).cpu()
        starts = torch.tensor(start_list, dtype=torch.int32)
        offsets = starts - lens
        info = _ForwardInfo(lens, offsets, torch.tensor(slot_list, dtype=torch.int32), slot_list, start_list,
                            bool(offsets.any()), {})
        state.scratch["tvm"] = info
    return info


def _param(params: dict, key: str):
    """params[key] (a weight or bias), replaced once by a 64-byte aligned copy when it is not aligned."""
    t = params.get(key)
    if isinstance(t, torch.Tensor) and not is_aligned(t):
        t = params[key] = aligned(t)
    return t


def _is_causal(info: _ForwardInfo, mask: torch.Tensor) -> bool:
    """Whether mask [B, T, U] is the runtime's default (column u visible iff u <= offsets[b] + t)."""
    known = info.causal.get(id(mask))
    if known is None:
        B, T, U = mask.shape
        u = torch.arange(U)
        causal = u[None, None, :] <= (info.offsets.long()[:, None, None] + torch.arange(T)[None, :, None])
        known = info.causal[id(mask)] = bool(torch.equal(mask.bool(), causal))
    return known


class TVMOps:
    """The kernel functions over one CPUKernels instance (see the module docstring).
    `linear_schedule="naive"` runs linear layers unscheduled (benchmarks' baseline)."""

    def __init__(self, cpu, linear_schedule: str = "tiled"):
        self.cpu = cpu
        self.schedule = linear_schedule

    def table(self) -> dict:
        table = dict(ref.KERNELS)
        table.update(linear=self.linear, packed_linear=self.packed_linear, rms_norm=self.rms_norm, rope=self.rope,
                     swiglu=self.swiglu, attention=self.attention)
        return table

    def linear(self, params, state, x):
        if x.dtype not in _TVM_DTYPES:
            return ref.linear(params, state, x)
        _forward_info(state)
        return self.cpu.linear(x, _param(params, "weight"), _param(params, "bias"), schedule=self.schedule)

    def packed_linear(self, params, state, x):
        if x.dtype not in _TVM_DTYPES:
            return ref.packed_linear(params, state, x)
        _forward_info(state)
        decoded = params.get("decoded")
        if decoded is None or decoded.dtype != x.dtype:
            weight = params["weight"]
            if not isinstance(weight, torch.Tensor):
                from specir.bf12 import unpack
                weight = unpack(weight.to("cpu") if weight.device.type != "cpu" else weight)
            decoded = params["decoded"] = aligned(weight.to(x.dtype).contiguous())
        return self.cpu.linear(x, decoded, _param(params, "bias"), schedule=self.schedule)

    def rms_norm(self, params, state, x):
        if x.dtype not in _TVM_DTYPES:
            return ref.rms_norm(params, state, x)
        _forward_info(state)
        group = params.get("group") or 0
        if group:
            return self.cpu.rms_norm(x.reshape(-1, group), _param(params, "weight"), params["eps"]).view(x.shape)
        return self.cpu.rms_norm(x, _param(params, "weight"), params["eps"])

    def rope(self, params, state, x, positions):
        if x.dtype not in _TVM_DTYPES:
            return ref.rope(params, state, x, positions)
        _forward_info(state)
        hd, rd = params["head_dim"], params["rotary_dim"]
        B, T, W = x.shape
        table = params["table"]
        key = ("tvm-rope", id(table))
        freq = state.scratch.get(key)
        if freq is None:
            inv_freq = table.frequencies(state.max_position + 1).float().contiguous()
            freq = state.scratch[key] = (inv_freq, float(table.attention_factor))
        inv_freq, factor = freq
        pos = positions.reshape(-1)
        rows = x.reshape(B * T, W // hd, hd)
        if rd == hd:
            out, _ = self.cpu.rotary(rows, None, pos, inv_freq, factor)
            return out.view(B, T, W)
        out = rows.clone()
        part = out[..., :rd]
        self.cpu.rotary(part, None, pos, inv_freq, factor, q_out=part)
        return out.view(B, T, W)

    def swiglu(self, params, state, gate, up):
        if gate.dtype not in _TVM_DTYPES:
            return ref.swiglu(params, state, gate, up)
        _forward_info(state)
        return self.cpu.silu_mul(gate, up)

    def attention(self, params, state, q, k, v, mask):
        if params.get("window") or q.dtype not in _TVM_DTYPES or params["head_dim"] % 4:
            return ref.attention(params, state, q, k, v, mask)
        info = _forward_info(state)
        H, KVH, D = params["heads"], params["kv_heads"], params["head_dim"]
        B, T, _ = q.shape
        cache_k, cache_v = state.cache.layer(params["layer"])
        _write_kv(cache_k, cache_v, k.view(B, T, KVH, D), v.view(B, T, KVH, D), info, state)
        tree_mask = None if _is_causal(info, mask) else mask
        scale = params["scale"] or 1.0 / math.sqrt(D)
        out = self.cpu.attention(q.view(B, T, H, D), cache_k, cache_v, info.lens, tree_mask, scale,
                                 slots=info.slots, offsets=info.offsets if info.any_offset else None)
        return out.view(B, T, H * D)


def _write_kv(cache_k, cache_v, k, v, info: _ForwardInfo, state) -> None:
    """New token t of request b -> row write_start[b] + t of slot slots[b] (KERNEL_CONTRACTS.md)."""
    B, T = k.shape[:2]
    if B == 1:
        s, start = info.slot_list[0], info.start_list[0]
        cache_k[s, :, start:start + T] = k[0].transpose(0, 1)
        cache_v[s, :, start:start + T] = v[0].transpose(0, 1)
        return
    index = state.write_start[:, None] + torch.arange(T)[None, :]
    slots = state.slots[:, None].expand(B, T)
    cache_k[slots, :, index] = k.to(cache_k.dtype)
    cache_v[slots, :, index] = v.to(cache_v.dtype)


def kernel_table(cpu, linear_schedule: str = "tiled") -> dict:
    """op name -> fn(params, state, *inputs) for the ModelRunner, over `cpu` (a CPUKernels)."""
    return TVMOps(cpu, linear_schedule).table()
