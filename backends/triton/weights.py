"""Device weights in the form a Program's launches read them.

Contract: `prepare_weights(program, raw, dtype)` takes the model's loaded weights (name -> tensor
in the checkpoint dtype, or a `BF12Matrix`) and returns `PreparedWeights`:
- `linear[i]`: per `linear` launch index, (weight, bias, use_triton): the group's matrices
  concatenated along the output rows (one tensor, no copy for a single member) and biases
  likewise. bf16 weights stay bf16 for bf16 and fp32 activations (the Triton GEMV computes
  x . w in fp32 either way, as the reference does after casting w); other combinations are cast
  to the activation dtype and run through torch (`use_triton` False). Which library runs a
  `use_triton` group at a given row count is decided per forward by gemm_route.py (cuBLAS for
  bf16 models from M = 8 rows, except in models with packed weights).
- `packed[i]`: per `packed_linear` launch, (BF12Matrix, bias): the group's matrices (each packed
  here when given as a bf16 tensor) concatenated along the output rows (`bf12.concat_rows`, equal
  to packing the concatenated matrix), biases likewise.
- `table[name]`: norm / embedding weights (a linear's RMSNorm prologue's `norm_weight` too), and
  every weight a hybrid op names (`weight_names`: norm and conv weights, biases, A_log, D,
  dt_bias), in the activation dtype (as the reference
  runner casts them); a `vocab_scatter`'s ids weight as its inverse map (`<ids>.inverse`, [vocab]
  int32, kernels/vocab_scatter.inverse_ids).
Callers drop `raw` afterwards so that concatenated copies do not double the device memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specir.bf12 import BF12Matrix, pack
from specir.bf12.concat import concat_rows

from .kernels.vocab_scatter import inverse_ids, inverse_key
from .program import HYBRID_NORMS, POINTWISE_OPS, RECURRENT_OPS, Program

WEIGHT_KEYS = {"conv1d": ("weight", "bias"), "gated_delta_rule": ("a_log", "dt_bias"),
               "mamba2_scan": ("a_log", "d", "dt_bias"), "vocab_scatter": ("ids",)}


def weight_names(launch) -> dict[str, str]:
    """attribute -> weight name, for the weights a torch-op or recurrent launch reads."""
    keys = WEIGHT_KEYS.get(launch.kind, ("weight", "bias"))
    return {k: launch.attrs[k] for k in keys if launch.attrs.get(k)}


@dataclass
class PreparedWeights:
    linear: dict[int, tuple[torch.Tensor, torch.Tensor | None, bool]] = field(default_factory=dict)
    packed: dict[int, tuple[BF12Matrix, torch.Tensor | None]] = field(default_factory=dict)
    table: dict[str, torch.Tensor] = field(default_factory=dict)

    def nbytes(self, skip: set[str] = frozenset()) -> int:
        total = sum(w.numel() * w.element_size() + (0 if b is None else b.numel() * b.element_size())
                    for w, b, _ in self.linear.values())
        total += sum(p.nbytes() for p, _ in self.packed.values())
        total += sum(t.numel() * t.element_size() for n, t in self.table.items() if n not in skip)
        return total


def _cast(t: torch.Tensor, dtype) -> torch.Tensor:
    return t if t.dtype == dtype else t.to(dtype)


def _packed(w) -> BF12Matrix:
    return w if isinstance(w, BF12Matrix) else pack(w.to(torch.bfloat16))


def prepare_weights(program: Program, raw: dict, dtype: torch.dtype) -> PreparedWeights:
    out = PreparedWeights()
    for index, launch in enumerate(program.launches):
        kind, a = launch.kind, launch.attrs
        if kind == "linear":
            mats = [raw[name] for name in a["weights"]]
            triton_ok = all(m.dtype == torch.bfloat16 for m in mats) and dtype in (torch.bfloat16, torch.float32)
            if not triton_ok:
                mats = [_cast(m, dtype) for m in mats]
            weight = mats[0].contiguous() if len(mats) == 1 else torch.cat(mats, 0)
            bias = None
            if any(a["biases"]):
                bias = torch.cat([_cast(raw[b], dtype) for b in a["biases"]], 0)
            out.linear[index] = (weight, bias, triton_ok)
        elif kind == "packed_linear":
            packed = concat_rows([_packed(raw[name]) for name in a["weights"]])
            bias = torch.cat([_cast(raw[b], dtype) for b in a["biases"]], 0) if any(a["biases"]) else None
            out.packed[index] = (packed, bias)
        elif kind in ("embed", "rms_norm", "add_rms_norm"):
            out.table[a["weight"]] = _cast(raw[a["weight"]], dtype).contiguous()
        elif kind == "vocab_scatter":  # the kept ids' inverse map, int32 (not cast)
            out.table[inverse_key(a["ids"])] = inverse_ids(raw[a["ids"]].to(torch.int64), int(a["vocab"]))
        elif kind in RECURRENT_OPS or kind in HYBRID_NORMS or kind in POINTWISE_OPS:
            for name in weight_names(launch).values():
                out.table[name] = _cast(raw[name], dtype).contiguous()
        if a.get("norm_weight"):  # a linear's RMSNorm prologue
            out.table[a["norm_weight"]] = _cast(raw[a["norm_weight"]], dtype).contiguous()
    return out
