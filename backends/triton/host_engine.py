"""The host path: the reference engine's step interpreter driving Triton model runners.

Contract: `HostPathEngine(pipeline, models, device)` behaves exactly as
specir.runtime.engine.Engine (same step ops, drafters, acceptance rules and RNG use), with every
model forward run by Triton kernels (runner.TritonModelRunner). It serves what the device
schedule does not: sampling (temperature > 0), dynamic trees, plugin step ops, and steps of
other shapes. It reads results on the host every step, so it is the slow path.
"""
from __future__ import annotations

from specir.runtime.engine import Engine

from .runner import TritonModelRunner


class HostPathEngine(Engine):
    def __init__(self, pipeline, models: dict, device):
        self.compiled = models
        used = {s.lstrip("@") for op in pipeline.step.ops for s in op.symbols}
        placeholders = {name: {} for name in used}  # weights live in the compiled models
        super().__init__(pipeline, device=str(device), backend="triton", weights=placeholders)

    def _make_runners(self, slots: int, max_seq: int) -> None:
        self.runners = {name: TritonModelRunner(self.compiled[name], slots=slots, max_seq=max_seq)
                        for name in self.models}
