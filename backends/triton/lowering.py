"""Triton lowering: what `specir compile --target h100|h200|a100` writes, and the engine that
`run`, `check` and `bench` execute.

`lower(pipeline, target, folder)` plans every model graph the step uses (program.py) and writes
into the build folder:
- `kernels/*.py`: copies of the Triton kernel sources the plan launches (plus their helpers);
- `launch_configs.json`: per model and per forward shape of the device schedule (verify width,
  drafter catch-up / draft / tree-level widths, batch 1) the launch parameters of every launch
  (block sizes, warps, stages, split-K and split-KV counts) for the target's SM count; linear
  groups that run cuBLAS at that width (gemm_route.py) say kernel "cublas.linear", and the
  manifest lists torch.nn.functional.linear (backend cublas) with the forwards that use it;
- `ptx/<module>.<kernel>.<n>.ptx` with SPECIR_TRITON_PTX=1: every launched kernel compiled
  offline for the target's architecture, specialised as the runtime's JIT does (ptx.py).
It returns a Lowering whose `kernels` list one entry per kernel with the IR ops it implements,
its source, its configurations and its PTX, and notes on what runs on the host path.

`make_engine(pipeline, device, build, weights=None)` returns engine.TritonEngine.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from specir.backends_api import Lowering
from specir.ir.nodes import Pipeline
from specir.targets import Target

from . import gemm_route
from .gemm_route import CUBLAS_CALL, CUBLAS_KERNEL
from .program import plan_program
from .schedule import Schedule, match_schedule

KERNEL_DIR = Path(__file__).with_name("kernels")
HELPERS = ("_numerics.py", "_interpreter_compat.py", "_device.py", "__init__.py")
EXTRA_SOURCES = {"add": Path(__file__).with_name("add_kernel.py")}
LIBRARY_OF = {"linear": ("linear.py", "linear_kernels.py", "linear_decode.py", "linear_config.py")}
REPRESENTATIVE_CONTEXT = 2048


def _used_models(pipeline: Pipeline):
    used = {s.lstrip("@") for op in pipeline.step.ops for s in op.symbols}
    return [m for m in pipeline.models if m.name in used and m.graph is not None]


def forward_shapes(schedule, model_name: str) -> dict[str, int]:
    """The forwards (name -> new tokens T, batch 1) the device schedule runs on a model."""
    if not isinstance(schedule, Schedule):
        return {"decode": 1}
    if model_name == schedule.target:
        shapes = {"verify": schedule.verify_width}
        if schedule.kind == "ngram":
            shapes["verify_no_draft"] = 1
        return shapes
    shapes = {"catch_up": schedule.feed_width}
    if schedule.kind == "chain" and schedule.k > 1:
        shapes["draft"] = 1
    if schedule.kind == "tree" and schedule.depth > 1:
        shapes["tree_level"] = schedule.topk
    return shapes


def _source_files(module: str) -> tuple[str, ...]:
    return LIBRARY_OF.get(module, (f"{module}.py",))


def lower(pipeline: Pipeline, target: Target, folder: Path) -> Lowering:
    from .launch_configs import launch_configs
    folder = Path(folder)
    schedule = match_schedule(pipeline)
    notes = []
    if isinstance(schedule, Schedule):
        notes.append(f"device schedule: {schedule.kind} (draft, verify, greedy acceptance and commit captured "
                     f"as CUDA graphs); temperature > 0 runs on the host path")
    else:
        notes.append(f"host path: {schedule}")
    programs = {m.name: plan_program(m) for m in _used_models(pipeline)}
    configs, kernels = {}, {}
    for name, program in programs.items():
        configs[name] = {}
        for shape, T in forward_shapes(schedule, name).items():
            configs[name][shape] = {"B": 1, "T": T, "max_seq": REPRESENTATIVE_CONTEXT,
                                    "launches": launch_configs(program, target, 1, T, REPRESENTATIVE_CONTEXT)}
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
    for name, program in programs.items():
        notes.append(f"@{name}: {gemm_route.reason(program)}")
    step_kernels = {"argmax.argmax": "verify.* (the target's greedy choice)"}
    if isinstance(schedule, Schedule):
        step_kernels["accept.greedy_accept_tree"] = "accept.*"
        if schedule.compact:
            step_kernels["kv_cache.kv_compact"] = 'commit {kv = "compact"}'
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
        rows.append({"op": ",".join(sorted(info["ops"])), "kernel": f"specir.backends.triton.kernels.{kernel}",
                     "backend": "triton", "source": sources[0], "sources": sources,
                     "launches_per_forward": info["launches_per_forward"], "config": "launch_configs.json"})
    if cublas:
        rows.append({"op": "linear", "kernel": CUBLAS_CALL, "backend": "cublas", "sources": [],
                     "forwards": cublas, "config": "launch_configs.json (kernel cublas.linear)"})
    (folder / "launch_configs.json").write_text(json.dumps(
        {"target": target.name, "arch": target.arch, "sm_count": target.sm_count,
         "schedule": schedule.__dict__ if isinstance(schedule, Schedule) else {"host_path": schedule},
         "models": configs}, indent=1, default=str) + "\n")
    from specir.ir.printer import print_pipeline

    from .ptx import emit_ptx
    ptx, note = emit_ptx(print_pipeline(pipeline), target, folder / "ptx")
    if note:
        notes.append(note)
    for row in rows:
        stems = {Path(source).stem for source in row["sources"]}
        files = [f for name, fs in sorted(ptx.items()) if name.split(".")[0] in stems for f in fs]
        if files:
            row["ptx"] = files
    return Lowering("triton", pipeline, rows, notes)


def make_engine(pipeline: Pipeline, device, build=None, weights: dict | None = None):
    """The engine that executes `pipeline` with Triton kernels on `device` ("cuda", or "cpu" under
    TRITON_INTERPRET=1: no CUDA graphs there)."""
    from .engine import TritonEngine
    return TritonEngine(pipeline, device, weights=weights)
