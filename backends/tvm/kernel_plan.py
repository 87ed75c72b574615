"""Which TVM kernels a pipeline needs on this CPU, and compiling the missing ones with progress.

`plan_kernels(pipeline, host)` finds the kernels by a dry run: every model graph the step uses
runs through the op table of `op_table.py` on fake (never initialised) weights, over the
forward shapes the runtime can issue (1 and 2 new tokens at batch 1 and 2, a long prefill, and
for models a tree op uses the same under a tree mask with scratch offsets), with a cache that
records each (kernel, params) instead of compiling it. So the plan follows the wrappers' own
choices (tiles, variants, serial/parallel at the thread count the engine will pick) and cannot
drift from them. `ensure_compiled(plan, cache)` compiles what no folder holds yet.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specir.errors import SpecirError
from specir.ir.nodes import Pipeline
from specir.runtime.dtypes import torch_dtype
from specir.runtime.threads import choose_threads

LONG_PREFILL = 1024  # new tokens of the dry run's long forward (past every parallel threshold)

KERNEL_OPS = {"linear": "linear", "rms_norm": "rms_norm", "rotary": "rope", "silu_mul": "swiglu",
              "attention": "attention"}  # kernel -> the IR op it implements


@dataclass
class PlannedKernel:
    kernel: str
    params: dict
    build: object  # () -> PrimFunc
    models: set = field(default_factory=set)

    def describe(self) -> str:
        """A short shape key for people: `n=768 k=256 bfloat16 tile=1x8x8 serial`."""
        p = self.params
        mode = "parallel" if p.get("parallel") else "serial"
        if self.kernel == "linear":
            tile = "x".join(map(str, p["tile"]))
            bias = " bias" if p["bias"] else ""
            return f"n={p['n']} k={p['k']} {p['weights']} {p['act']}{bias} tile={tile} {mode}"
        if self.kernel == "attention":
            kind = "blocked" if p["blocked"] else "decode"
            mask = " tree-mask" if p["masked"] else ""
            return f"heads={p['heads']} kv_heads={p['kv_heads']} head_dim={p['head_dim']} {p['act']} {kind}{mask} {mode}"
        if self.kernel == "rotary":
            return f"heads={p['heads'] + p['kv_heads']} head_dim={p['head_dim']} {p['act']} {mode}"
        if self.kernel == "rms_norm":
            return f"hidden={p['hidden']} {p['act']}{' +residual' if p['fused_residual'] else ''} {mode}"
        if self.kernel == "silu_mul":
            return f"width={p['width']} {p['act']} {mode}"
        return " ".join(f"{k}={v}" for k, v in p.items())


class _RecordingCache:
    """Stands in for a KernelCache: records what the wrappers ask for, returns no-op functions."""

    def __init__(self, host):
        self.host = host
        self.plans: dict = {}
        self.wanted: dict[tuple, PlannedKernel] = {}
        self.model = ""

    def get(self, kernel: str, params: dict, build):
        key = (kernel, tuple(params.items()))
        entry = self.wanted.setdefault(key, PlannedKernel(kernel, dict(params), build))
        entry.models.add(self.model)
        return _no_op


def _no_op(*args):
    return None


def tree_models(pipeline: Pipeline) -> set[str]:
    """Models whose graph takes a tree mask (`mask<tree>`: tree-verify, batch-fusion, a cascade
    over a tree): their attention kernels are planned masked."""
    return {m.name for m in pipeline.used_models() if m.mask_kind == "tree"}


def planned_threads(pipeline: Pipeline) -> int:
    """The thread count the engine will choose (runtime/threads.py) from the declared weights."""
    total = sum({"f32": 4}.get(w.type.dtype, 2) * math.prod(w.type.shape)
                for model in pipeline.used_models() for w in model.weights
                if w.type.dtype != "bf12")  # the engine counts torch tensors only (runtime/threads.py)
    return choose_threads(total)


def plan_kernels(pipeline: Pipeline, host, threads: int | None = None,
                 linear_schedule: str = "tiled") -> list[PlannedKernel]:
    """Every kernel the pipeline's forwards will call on `host` (see the module docstring)."""
    from specir.runtime.model_runner import ModelRunner

    from .host_target import _threads, set_threads
    from .kernels import CPUKernels
    from .op_table import kernel_table

    recording = _RecordingCache(host)
    table = kernel_table(CPUKernels(cache=recording), linear_schedule)
    trees = tree_models(pipeline)
    threads = threads or planned_threads(pipeline)
    previous_torch, previous_tvm = torch.get_num_threads(), _threads
    torch.set_num_threads(threads)  # the op table sizes TVM's pool (and so picks variants) from it
    try:
        with torch.no_grad():
            for model in pipeline.used_models():
                recording.model = model.name
                _dry_run(ModelRunner, model, table, model.name in trees)
    finally:
        torch.set_num_threads(previous_torch)
        set_threads(previous_tvm)
    return sorted(recording.wanted.values(), key=lambda k: (k.kernel, sorted(k.models), k.describe()))


def _fake_weights(model, dtype) -> dict:
    """Uninitialised tensors of the declared shapes (torch.empty: pages are never touched)."""
    return {w.name: torch.zeros(tuple(w.type.shape), dtype=torch.int32) if w.type.dtype == "i32"  # token ids
            else torch.empty(tuple(w.type.shape), dtype=dtype) for w in model.weights}


def _dry_run(runner_cls, model, table, tree: bool) -> None:
    dtype = torch_dtype(str(model.attrs.get("dtype", "bf16")))
    runner = runner_cls(model, _fake_weights(model, dtype), slots=2, max_seq=LONG_PREFILL + 8, kernels=table,
                        backend="tvm")
    shapes = [(1, 1), (2, 1), (1, 2), (1, LONG_PREFILL)]
    for batch, T in shapes:
        _forward(runner, batch, T, masked=False)
        if tree:
            _forward(runner, batch, T, masked=True)


def _forward(runner, batch: int, T: int, masked: bool) -> None:
    ids = torch.zeros(batch, T, dtype=torch.long)
    pos = torch.arange(T)[None, :].expand(batch, T).contiguous()
    if not masked:
        runner.forward(list(range(batch)), ids, pos)
        return
    offsets = [1] * batch  # a tree level after one scratch row: never the causal pattern
    mask = torch.zeros(batch, T, 1 + T, dtype=torch.bool)
    mask[:, torch.arange(T), 1 + torch.arange(T)] = True
    runner.forward(list(range(batch)), ids, pos, offsets=offsets, mask=mask)


def missing(plan: list[PlannedKernel], cache) -> list[PlannedKernel]:
    """Kernels of `plan` that neither the cache folder nor its read folders hold."""
    return [k for k in plan if cache.find(k.kernel, k.params) is None]


def ensure_compiled(plan: list[PlannedKernel], cache, *, stream=None) -> int:
    """Compile the planned kernels not on disk into `cache.cache_dir`, with a progress line on
    `stream` (stderr): `compiling 14 TVM kernels for this CPU ... 3/14`. Returns how many."""
    todo = missing(plan, cache)
    if not todo:
        return 0
    stream = stream or sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty()
    head = f"compiling {len(todo)} TVM kernels for this CPU into {_short(cache.cache_dir)} (once) ..."
    start = time.perf_counter()
    if not tty:
        print(head, file=stream, flush=True)
    for i, k in enumerate(todo, 1):
        if tty:
            print(f"\r{head} {i}/{len(todo)}", end="", file=stream, flush=True)
        try:
            cache.get(k.kernel, k.params, k.build)
        except Exception as exc:  # a TVM or toolchain failure: one message, not a traceback
            raise SpecirError(f"TVM could not compile the {k.kernel} kernel ({k.describe()}): "
                              f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}",
                              hint="check that a C compiler (cc/g++) is installed for TVM's export_library; "
                                   "`specir compile --target cpu` needs one too") from None
    seconds = time.perf_counter() - start
    print(("\r" + head + f" {len(todo)}/{len(todo)}" if tty else f"compiled {len(todo)} TVM kernels")
          + f" in {seconds:.1f} s", file=stream, flush=True)
    return len(todo)


def _short(path: Path) -> str:
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home):] if text.startswith(home + "/") else text
