"""TVM lowering for CPU targets: what `specir compile --target cpu` writes, and the kernel table
that `run`, `check` and `bench` execute with.

`lower(pipeline, target, folder)` plans the kernels the pipeline's model graphs need on this CPU
(kernel_plan.py: a dry run of the op table), compiles the ones the user cache lacks (stderr
progress), and copies every library into `folder/tvm/` (`<kernel>-<key>.so`, its `.json` key
material and its scheduled TIR as `.tir.py`). The
Lowering lists one row per kernel (op, kernel, shape key, file) plus the ops that stay torch,
and notes what falls back (BF12, sliding windows, f16).

`kernels_for(pipeline, build)` returns the op table (op_table.py) over kernels read from
`build/tvm/` when there is a build, else from the user cache (`$SPECIR_TVM_CACHE`, else
`$SPECIR_CACHE/tvm`, else `~/.cache/specir/tvm`); kernels neither holds are compiled into the
user cache first, with the same progress line. A second run compiles nothing.

Without an importable apache-tvm, `lower` returns the reference lowering with a note and
`unavailable_reason()` tells the session to run on the reference backend.
"""
from __future__ import annotations

import functools
import shutil
from pathlib import Path

from specir.backends_api import Lowering
from specir.ir.nodes import Pipeline
from specir.targets import Target

BUILD_SUBDIR = "tvm"

TORCH_OPS = {
    "embed": "torch.nn.functional.embedding",
    "add": "torch.add",
}


@functools.cache
def unavailable_reason() -> str | None:
    """None when apache-tvm imports; else a one-line reason."""
    try:
        import tvm  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install failing at load
        return f"apache-tvm is not importable ({type(exc).__name__}: {exc}); pip install 'apache-tvm==0.27.*'"
    return None


def _cache(read_dirs=(), cache_dir=None):
    from .kernel_cache import KernelCache
    return KernelCache(cache_dir, read_dirs=read_dirs)


def lower(pipeline: Pipeline, target: Target, folder: Path) -> Lowering:
    reason = unavailable_reason()
    if reason:
        from specir.backends.reference.lowering import lower as reference_lower
        lowering = reference_lower(pipeline, target, folder)
        lowering.notes.append(f"tvm backend unavailable: {reason}; lowered to the reference backend (torch)")
        return lowering
    from .kernel_cache import name_of
    from .kernel_plan import ensure_compiled, plan_kernels, planned_threads

    cache = _cache()
    threads = planned_threads(pipeline)
    plan = plan_kernels(pipeline, cache.host, threads)
    ensure_compiled(plan, cache)
    out = Path(folder) / BUILD_SUBDIR
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in plan:
        library = cache.find(k.kernel, k.params)
        row = {"op": _op_of(k.kernel, pipeline), "kernel": f"specir.backends.tvm.{k.kernel}", "backend": "tvm",
               "shape": k.describe(), "models": sorted(k.models), "file": f"{BUILD_SUBDIR}/{library.name}",
               "params": k.params}
        for suffix in (".so", ".json", ".tir.py"):
            companion = library.with_name(name_of(library) + suffix)
            if companion.exists():
                shutil.copy2(companion, out / companion.name)
                if suffix == ".tir.py":
                    row["source"] = f"{BUILD_SUBDIR}/{companion.name}"
        rows.append(row)
    rows += _torch_rows(pipeline)
    notes = [f"tvm: {len(plan)} kernels for {cache.host.mcpu} ({', '.join(cache.host.features) or 'no SIMD flags'}), "
             f"{threads} thread{'s' if threads > 1 else ''} (SPECIR_THREADS overrides at run time; other "
             f"thread counts compile their variants on first use)"]
    notes += _fallback_notes(pipeline)
    return Lowering("tvm", pipeline, rows, notes)


def _op_of(kernel: str, pipeline: Pipeline) -> str:
    from .kernel_plan import KERNEL_OPS
    op = KERNEL_OPS.get(kernel, kernel)
    if kernel == "linear" and _uses(pipeline, "packed_linear"):
        return "linear,packed_linear"
    return op


def _uses(pipeline: Pipeline, op_name: str) -> bool:
    return any(op.name == op_name for m in pipeline.used_models() for op in m.graph.ops)


def _torch_rows(pipeline: Pipeline) -> list[dict]:
    rows = [{"op": op, "kernel": kernel, "backend": "torch"} for op, kernel in TORCH_OPS.items() if _uses(pipeline, op)]
    rows.append({"op": "attention", "kernel": "specir.backends.tvm.op_table._write_kv (KV-cache write)",
                 "backend": "torch"})
    if _window_layers(pipeline):
        rows.append({"op": "attention {window}", "kernel": "specir.backends.reference.ops.attention",
                     "backend": "reference"})
    return rows


def _window_layers(pipeline: Pipeline) -> list[str]:
    return [f"@{m.name} layer {op.attrs['layer']}" for m in pipeline.used_models() for op in m.graph.ops
            if op.name == "attention" and op.attrs.get("window")]


def _fallback_notes(pipeline: Pipeline) -> list[str]:
    notes = []
    if _uses(pipeline, "packed_linear"):
        notes.append("packed_linear (bf12): no in-kernel BF12 decode on the CPU yet; each matrix is decoded once to "
                     "bf16 at load and runs on the TVM linear kernel (same bits as linear on the unpacked weights; "
                     "memory traffic is that of bf16)")
    windows = _window_layers(pipeline)
    if windows:
        notes.append(f"sliding-window attention runs on the torch reference kernel ({len(windows)} layers: "
                     f"{', '.join(windows[:4])}{' ...' if len(windows) > 4 else ''})")
    dtype = _dtype_note(pipeline)
    return notes + ([dtype] if dtype else [])


def _dtype_note(pipeline: Pipeline) -> str | None:
    """The models whose activation dtype has no TVM kernels (f16): they compute in that dtype, as the IR
    says, on the reference (torch) kernels."""
    other = sorted({str(m.attrs.get('dtype')) for m in pipeline.used_models()} - {"bf16", "f32"})
    if not other:
        return None
    return (f"activations in {', '.join(other)} have no TVM kernels; those models run the reference kernels "
            f"(in {', '.join(other)}, as the IR says)")


@functools.cache
def _kernels(read_dirs: tuple[str, ...], cache_dir: str):
    """One CPUKernels per set of folders, shared by every engine of this process."""
    from .kernels import CPUKernels
    return CPUKernels(cache=_cache(read_dirs, cache_dir))


def kernels_for(pipeline: Pipeline, build: Path | None) -> dict:
    """The op table for the ModelRunner; compiles (with progress) what no folder holds yet.
    Without apache-tvm: the reference kernels, with a one-line note on stderr."""
    reason = unavailable_reason()
    if reason:
        import sys

        from specir.backends.reference.ops import KERNELS
        print(f"note: tvm backend unavailable ({reason}); running on the reference backend", file=sys.stderr)
        return dict(KERNELS)
    from .kernel_cache import default_cache_dir
    from .kernel_plan import ensure_compiled, plan_kernels
    from .op_table import kernel_table

    read_dirs = (str(Path(build) / BUILD_SUBDIR),) if build is not None and (Path(build) / BUILD_SUBDIR).is_dir() else ()
    cpu = _kernels(read_dirs, str(default_cache_dir()))
    ensure_compiled(plan_kernels(pipeline, cpu.cache.host), cpu.cache)
    note = _dtype_note(pipeline)
    if note:
        import sys
        print(f"note: {note}", file=sys.stderr)
    return kernel_table(cpu)


ATTENTION_SCORES = True  # its attention materialises fp32 scores per forward (specir.runtime.memory counts them)


def step_backend(pipeline: Pipeline, device, build: Path | None = None):
    """The decode step's backend: the model regions on this op table (TVM kernels), step ops in torch."""
    from specir.backends.reference.step_backend import TableStepBackend
    return TableStepBackend(device, kernels_for(pipeline, build), "tvm")
