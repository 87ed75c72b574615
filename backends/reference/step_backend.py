"""The decode step on the reference (torch) kernels, or on any kernel table in their contract
(the TVM backend's): model regions run op by op (specir.runtime.model_runner.ModelRunner); every
step op runs its torch semantics; nothing is captured."""
from __future__ import annotations

import torch

from specir.runtime.model_runner import ModelRunner
from specir.runtime.threads import choose_threads
from specir.step.backend import StepBackend


class TableStepBackend(StepBackend):
    """`kernels`: op name -> fn(params, state, *inputs); `kernel_backend` names it for OP_KERNELS."""

    def __init__(self, device, kernels: dict | None = None, kernel_backend: str = "reference"):
        super().__init__(device)
        self.kernels, self.kernel_backend = kernels, kernel_backend
        self.weight_bytes = 0

    def executor(self, model, weights):
        if self.device.type == "cpu":  # small models decode faster on one thread (runtime/threads.py)
            self.weight_bytes += sum(t.numel() * t.element_size() for t in weights.values()
                                     if isinstance(t, torch.Tensor))
            torch.set_num_threads(choose_threads(self.weight_bytes))
        return ModelRunner(model, weights, slots=1, max_seq=1, device=self.device, kernels=self.kernels,
                           backend=self.kernel_backend)


def step_backend(pipeline, device, build=None) -> StepBackend:
    return TableStepBackend(device)
