"""Triton lowering: what `specir compile --target h100|h200|a100` writes, and the engine that
`run`, `check` and `bench` execute.

`lower(pipeline, target, folder)` plans every model graph the step uses (program.py) and writes
into the build folder:
- `kernels/*.py`: copies of the Triton kernel sources the plan launches (plus their helpers);
- `launch_configs.json`: per model and per forward the step runs (the step ops' `forwards`
  interfaces: verify width, drafter catch-up / draft / tree-level widths; batch 1) the launch
  parameters of every launch
  (block sizes, warps, stages, split-K and split-KV counts) for the target's SM count; linear
  groups that run cuBLAS at that width (gemm_route.py) say kernel "cublas.linear", and the
  manifest lists torch.nn.functional.linear (backend cublas) with the forwards that use it (and
  the launches of the fused parts a forward runs apart, fused_parts.py: activation.silu_mul,
  norm.rms_norm, add.add, norm.add_rms_norm, rope.rope_kv_write);
- `ptx/<module>.<kernel>.<n>.ptx` with `emit_ptx` (`compile --emit-ptx`): every launched kernel compiled
  offline for the target's architecture, specialised as the runtime's JIT does (ptx.py).
It returns a Lowering whose `kernels` list one entry per kernel with the IR ops it implements,
its source, its configurations and its PTX, and notes on how the step is lowered (its segments).

`step_backend(pipeline, device, build)` returns the decode step's backend (step_backend.py).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from specir.backends_api import Lowering
from specir.ir.nodes import Attrs, Pipeline
from specir.targets import Target

from . import gemm_route
from .gemm_route import CUBLAS_CALL, CUBLAS_KERNEL
from .launch_configs import REPRESENTATIVE_CONTEXT
from .program import fusions, plan_program

KERNEL_DIR = Path(__file__).with_name("kernels")
HELPERS = ("_numerics.py", "_interpreter_compat.py", "_device.py", "__init__.py")
EXTRA_SOURCES = {"add": Path(__file__).with_name("add_kernel.py")}
LIBRARY_OF = {"linear": ("linear.py", "linear_kernels.py", "linear_decode.py", "linear_config.py")}


# kernels a fused linear launches for its prologue or epilogue where it runs them apart (fused_parts.parts_apart:
# launch_configs._separate_parts; the rope + KV write at more than one row: launch_configs._separate_rope_kv)
SEPARATE_PARTS = {"activation.silu_mul": "swiglu", "norm.rms_norm": "rms_norm", "norm.add_rms_norm": "add_rms_norm",
                  "add.add": "add", "rope.rope_kv_write": "rope_kv_write"}

def forward_shapes(pipeline: Pipeline, model_name: str) -> dict[str, tuple[int, bool]]:
    """The forwards (purpose -> (new tokens T, packed), batch 1) the step runs on a model (op
    interfaces); packed: a packed verify's one-token rows, T of them, grouped as one request."""
    from specir.step.interfaces import StepInfo
    shapes = {}
    for f in StepInfo(pipeline).forwards():
        if f.model == model_name:
            shapes[f.purpose if f.purpose not in shapes else f"{f.purpose}-{f.tokens}"] = (f.tokens, f.packed)
    return shapes or {"decode": (1, False)}


def with_backend_policy(pipeline: Pipeline) -> Pipeline:
    """Every model the step uses states its backend policy in the IR: the gemm policy
    (`cublas_min_rows`, gemm_route.py) and the fusions (`fuse`, passes/fusion.py)."""
    for model in pipeline.used_models():
        if "cublas_min_rows" not in model.attrs:
            pipeline = pipeline.with_model(model.with_attrs(cublas_min_rows=gemm_route.default_min_rows(model)))
            model = pipeline.model(model.name)
        if "fuse" not in model.attrs:  # the default of passes/fusion.py
            pipeline = pipeline.with_model(model.with_attrs(fuse=Attrs(fusions(model))))
    return pipeline


def _source_files(module: str) -> tuple[str, ...]:
    return LIBRARY_OF.get(module, (f"{module}.py",))


def lower(pipeline: Pipeline, target: Target, folder: Path, *, emit_ptx: bool = False) -> Lowering:
    from .launch_configs import launch_configs
    folder = Path(folder)
    pipeline = with_backend_policy(pipeline)
    from specir.step.program import StepProgram
    from specir.step.backend import StepBackend
    segments = StepProgram(pipeline, StepBackend("cpu")).describe()
    notes = ["step: " + " | ".join(("host: " if seg["host"] else "device: ") + ", ".join(seg["ops"])
                                   for seg in segments)
             + " (device segments are captured as CUDA graphs, per batch size and sampling mode)"]
    programs = {m.name: plan_program(m) for m in pipeline.used_models()}
    configs, kernels = {}, {}
    for name, program in programs.items():
        configs[name] = {}
        for shape, (T, packed) in forward_shapes(pipeline, name).items():
            configs[name][shape] = {"B": 1, "T": T, "max_seq": REPRESENTATIVE_CONTEXT,
                                    **({"packed": True} if packed else {}),
                                    "launches": launch_configs(program, target, 1, T, REPRESENTATIVE_CONTEXT,
                                                               packed=packed)}
        for launch in program.launches:
            entry = kernels.setdefault(launch.kernel, {"ops": set(), "launches_per_forward": {}})
            entry["ops"].add(launch.kind)
            count = entry["launches_per_forward"]
            count[name] = count.get(name, 0) + 1
    cublas: dict[str, list[str]] = {}
    for name, shapes in configs.items():
        for shape, entry in shapes.items():
            routed = [r for r in entry["launches"] if r["kernel"] == CUBLAS_KERNEL]
            if routed:
                cublas.setdefault(name, []).append(f"{shape} (T={entry['T']}: {len(routed)} linear groups)")
            for kernel, op in SEPARATE_PARTS.items():
                if any(r["kernel"] == kernel for r in entry["launches"]):
                    # a fused prologue or epilogue runs as its own launch at this width
                    entry_of = kernels.setdefault(kernel, {"ops": set(), "launches_per_forward": {}})
                    entry_of["ops"].add(op)
    for name, program in programs.items():
        notes.append(f"@{name}: {gemm_route.reason(program)}")
    step_kernels = {"argmax.argmax": "accept.* (the verifier's greedy choice)",
                    "accept.greedy_accept_tree": "accept.*"}
    if any(op.attrs.get("kv") == "compact" for op in pipeline.step.ops):
        step_kernels["kv_cache.kv_compact"] = 'commit {kv = "compact"}'
    from specir.step.interfaces import interfaces_of

    from .step_backend import TritonStepBackend
    for op in pipeline.step.ops:  # the backend hooks an op's lowering calls (StepInterfaces.backend_calls)
        for call in interfaces_of(op).backend_calls:
            if call in TritonStepBackend.hook_kernels:
                step_kernels.setdefault(TritonStepBackend.hook_kernels[call], op.name)
    for kernel, op in step_kernels.items():
        kernels.setdefault(kernel, {"ops": {op}, "launches_per_forward": {}})

    src_dir = folder / "kernels"
    src_dir.mkdir(parents=True, exist_ok=True)
    for helper in HELPERS:
        shutil.copy2(KERNEL_DIR / helper, src_dir / helper)
    rows = []
    for kernel in sorted(kernels):
        module = kernel.split(".")[0]
        sources = []
        if module in EXTRA_SOURCES:
            shutil.copy2(EXTRA_SOURCES[module], src_dir / EXTRA_SOURCES[module].name)
            sources.append(f"kernels/{EXTRA_SOURCES[module].name}")
        else:
            for file in _source_files(module):
                shutil.copy2(KERNEL_DIR / file, src_dir / file)
                sources.append(f"kernels/{file}")
        info = kernels[kernel]
        rows.append({"op": ",".join(sorted(info["ops"])),
                     "kernel": f"specir.backends.triton.kernels.{kernel}", "backend": "triton", "source": sources[0],
                     "sources": sources, "launches_per_forward": info["launches_per_forward"], "config": "launch_configs.json"})
    if cublas:
        rows.append({"op": "linear", "kernel": CUBLAS_CALL, "backend": "cublas", "sources": [],
                     "forwards": cublas, "config": "launch_configs.json (kernel cublas.linear)"})
    (folder / "launch_configs.json").write_text(json.dumps(
        {"target": target.name, "arch": target.arch, "sm_count": target.sm_count,
         "step": segments,
         "models": configs}, indent=1, default=str) + "\n")
    from specir.ir.printer import print_pipeline

    from .ptx import emit_ptx as compile_ptx
    ptx, note = compile_ptx(print_pipeline(pipeline), target, folder / "ptx", emit_ptx)
    if note:
        notes.append(note)
    for row in rows:
        stems = {Path(source).stem for source in row["sources"]}
        files = [f for name, fs in sorted(ptx.items()) if name.split(".")[0] in stems for f in fs]
        if files:
            row["ptx"] = files
    return Lowering("triton", pipeline, rows, notes)


ATTENTION_SCORES = False  # flash attention: no scores tensor (specir.runtime.memory counts them)


def step_backend(pipeline: Pipeline, device, build=None):
    """The decode step's backend: Triton kernels, CUDA graphs on a GPU (TRITON_INTERPRET=1 on a CPU)."""
    from .step_backend import TritonStepBackend
    return TritonStepBackend(device)
