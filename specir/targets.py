"""Deployment targets, read from targets.json (data, not code)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import SpecirError

TARGETS_FILE = Path(__file__).with_name("targets.json")


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # gpu | cpu
    backend: str
    vendor: str
    arch: str
    memory_bytes: int
    memory_bandwidth: float
    copy_bandwidth: float
    peak_bf16_flops: float
    sm_count: int
    shared_memory_per_sm: int
    l2_bytes: int
    notes: str = ""
    measured_bf16_flops: float | None = None
    # the rates this project's decode steps reach on the target, fitted to whole measured steps
    # (bench/cost_model_check.py): `step_serial`, the fraction of the shorter of a forward's
    # streaming and compute times that does not hide under the longer (0: their max, 1: their sum);
    # `step_row_tile`, the GEMM row tile (a forward's matmul FLOPs are priced at its rows rounded up
    # to it: a 65-row verify costs the FLOPs of 128 rows, and rows within a tile are free once
    # streaming the weights dominates)
    step_bandwidth: float | None = None
    step_flops: float | None = None
    step_serial: float = 0.0
    step_row_tile: int = 1
    # `step_op_seconds`: the fixed cost of one graph op of a forward (dispatch and launch), fitted
    # where a step's ops are not captured into one graph (the CPU: a small model's decode step is
    # mostly this); 0 where the fitted step rates already cover it (a GPU's captured step)
    step_op_seconds: float = 0.0
    # `rank_reads`: the passes over a drafter's logits its backend's ranking makes (top-k
    # log-probabilities; the Triton kernels read them once: backends/triton/kernels/ranking.py);
    # None: torch's ranking, priced at specir/step/ranking.BYTES_PER_LOGIT
    rank_reads: float | None = None

    @property
    def device_bandwidth(self) -> float:
        """The device's own rate: measured copy bandwidth where known, else the datasheet's."""
        return self.copy_bandwidth or self.memory_bandwidth

    @property
    def device_flops(self) -> float:
        """The device's own dense bf16 matmul rate: measured where known, else peak."""
        return self.measured_bf16_flops or self.peak_bf16_flops

    @property
    def bandwidth(self) -> float:
        """The bandwidth the cost model uses: the fitted step rate, else the device's."""
        return self.step_bandwidth or self.device_bandwidth

    @property
    def flops(self) -> float:
        """The matmul rate the cost model uses: the fitted step rate, else the device's."""
        return self.step_flops or self.device_flops

    def roofline(self, moved_bytes: float, flops: float) -> float:
        """Seconds of a forward that moves `moved_bytes` and does `flops`: the slower of the two
        plus `step_serial` of the other."""
        memory, compute = moved_bytes / self.bandwidth, flops / self.flops
        return max(memory, compute) + self.step_serial * min(memory, compute)

    def gemm_rows(self, rows: int) -> int:
        """The rows a GEMM over `rows` rows is priced at: rounded up to `step_row_tile`."""
        tile = max(1, self.step_row_tile)
        return -(-rows // tile) * tile


@lru_cache(maxsize=1)
def all_targets() -> dict[str, Target]:
    data = json.loads(TARGETS_FILE.read_text())
    out = {}
    for name, fields in data.items():
        if name.startswith("_"):
            continue
        fields = dict(fields)
        if name == "cpu":
            fields["sm_count"] = os.cpu_count() or 1
        out[name] = Target(name=name, **fields)
    return out


def get_target(name: str) -> Target:
    targets = all_targets()
    if name not in targets:
        near = [t for t in targets if t == name.strip().lower()]
        hint = (f"did you mean '{near[0]}'? (target names are lower case)" if near
                else "targets: " + ", ".join(targets) + " (see `specir targets`)")
        raise SpecirError(f"unknown target {name!r}", hint=hint)
    return targets[name]


def host_target() -> str:
    """The default target: the machine's GPU if it has one, else cpu."""
    try:
        import torch
        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0).lower()
            for key in ("h200", "h100", "a100"):
                if key in name:
                    return key
            return "h100" if torch.cuda.get_device_capability(0) >= (9, 0) else "a100"
    except Exception:
        pass
    return "cpu"


def interpreting_triton() -> bool:
    """TRITON_INTERPRET=1: Triton kernels run in Triton's CPU interpreter (slow; for tests)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def require_available(target: Target) -> None:
    """Raise when this machine cannot execute code for `target` (a GPU target runs on a CPU only in
    Triton's interpreter, TRITON_INTERPRET=1)."""
    if target.kind == "gpu":
        import torch
        if not torch.cuda.is_available() and not interpreting_triton():
            raise SpecirError(f"target {target.name} needs an NVIDIA GPU, and this machine has none",
                              hint="use --target cpu here, run on a machine with the GPU (compiling for a GPU "
                                   "target works anywhere), or set TRITON_INTERPRET=1 to run its Triton kernels "
                                   "in Triton's CPU interpreter (slow; for tests)")
