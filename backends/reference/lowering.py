"""Reference lowering: nothing is generated; every op runs as the torch function named here."""
from __future__ import annotations

from pathlib import Path

from specir.backends_api import Lowering
from specir.ir.nodes import Pipeline
from specir.targets import Target

TORCH_KERNELS = {
    "embed": "torch.nn.functional.embedding",
    "rms_norm": "specir.backends.reference.ops.rms_norm",
    "linear": "torch.nn.functional.linear",
    "packed_linear": "specir.bf12.linear_reference",
    "rope": "specir.backends.reference.ops.rope",
    "attention": "specir.backends.reference.ops.attention",
    "swiglu": "torch.nn.functional.silu(gate) * up",
    "add": "torch.add",
}
TORCH_KERNELS.update({name: f"specir.backends.reference.hybrid.{fn}" for name, fn in
                      (("rms_norm_1p", "rms_norm_1p"), ("rms_norm_gated", "rms_norm_gated"), ("slice", "slice_"),
                       ("concat", "concat"), ("scale", "scale"), ("activation", "activation"), ("mul", "mul"))})
TORCH_KERNELS["vocab_scatter"] = "specir.backends.reference.vocab.vocab_scatter"
TORCH_KERNELS.update({name: f"specir.backends.reference.recurrent.{name}" for name in
                      ("conv1d", "gated_delta_rule", "mamba2_scan")})


def lower(pipeline: Pipeline, target: Target, folder: Path) -> Lowering:
    used = sorted({op.name for m in pipeline.models if m.graph for op in m.graph.ops})
    kernels = [{"op": name, "kernel": TORCH_KERNELS.get(name, "plugin"), "backend": "reference"} for name in used]
    return Lowering("reference", pipeline, kernels)


ATTENTION_SCORES = True  # its attention materialises fp32 scores per forward (specir.runtime.memory counts them)


def step_backend(pipeline: Pipeline, device, build=None):
    """The decode step's backend: torch kernels everywhere."""
    from .step_backend import TableStepBackend
    return TableStepBackend(device)
