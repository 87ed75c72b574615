"""PTX of exactly the kernels a lowering launches, compiled for the target's architecture with no
GPU (Triton's bundled ptxas).

Contract: `emit_ptx(pipeline_text, target, folder, enabled) -> ({"module.function": [paths]}, note)`.
With `enabled` (`specir compile --emit-ptx`) it runs every forward the step's ops declare (and
the verify's step kernels: argmax, acceptance, KV compaction) once on meta-sized CPU stand-ins with
Triton's launch replaced by an offline compile (`JITFunction.run(warmup=True)` under a driver
that reports the target's architecture), so each kernel is specialised exactly as the runtime's
JIT specialises it (argument dtypes, 16-byte alignment, constexprs), and writes each compiled
kernel's PTX to `folder/<module>.<function>.<n>.ptx`. Under TRITON_INTERPRET=1 the kernels are
interpreter objects, so this runs in a subprocess with the interpreter off. Without the variable
it writes nothing and says how to get them (compiling takes about a second per kernel). The
draft ops' ranking and tree kernels (ranking.py, tree_expand.py, tree_nodes.py) are listed in the
manifest but not emitted here: `python -m specir.backends.triton.kernels.compile_check` builds them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

def emit_ptx(pipeline_text: str, target, folder: Path, enabled: bool = False) -> tuple[dict, str]:
    if not enabled:
        return {}, (f"PTX not emitted (compile with --emit-ptx to compile every launched kernel for {target.arch} "
                    "here; the runtime JIT-compiles them for the GPU it runs on)")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "pipeline.spec"
    spec.write_text(pipeline_text)
    arch = int(target.arch.replace("sm_", ""))
    env = dict(os.environ, TRITON_INTERPRET="0")
    proc = subprocess.run([sys.executable, "-m", "specir.backends.triton.ptx", str(spec), str(arch), str(folder)],
                          capture_output=True, text=True, env=env)
    spec.unlink(missing_ok=True)
    if proc.returncode != 0:
        return {}, f"PTX not emitted: the offline compile failed ({proc.stderr.strip().splitlines()[-1:]})"
    files = json.loads(proc.stdout.strip().splitlines()[-1])
    return files, f"PTX for {target.arch}: {sum(len(v) for v in files.values())} kernels in ptx/"


# ---------------------------------------------------------------------- the subprocess
class _OfflineDriver:
    """Enough of a Triton driver for `JITFunction.run(warmup=True)`: the target, a device id."""

    def __init__(self, arch: int):
        from triton.backends.compiler import GPUTarget
        self.target = GPUTarget("cuda", arch, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self.target

    def get_active_torch_device(self):
        import torch
        return torch.device("cpu")


class _StandIn:
    """A CompiledModel whose weights are uninitialised CPU tensors (one per distinct shape)."""

    def __init__(self, model):
        import torch

        from specir.runtime.dtypes import torch_dtype

        from .compiled_model import RopeTable
        from .program import plan_program
        from .kernels.vocab_scatter import inverse_key
        from .weights import PreparedWeights, weight_names
        self.model, self.name, self.device = model, model.name, torch.device("cpu")
        self.dtype = torch_dtype(str(model.attrs.get("dtype", "bf16")))
        self.packed_buffers = {}  # as CompiledModel.packed_buffers
        self.program = plan_program(model)
        self.vocab = model.graph.result_type.width
        shapes: dict = {}

        def empty(shape, dtype):
            key = (tuple(shape), dtype)
            if key not in shapes:
                shapes[key] = torch.empty(*shape, dtype=dtype)
            return shapes[key]

        types = {w.name: w.type for w in model.weights}
        pw = PreparedWeights()
        for i, launch in enumerate(self.program.launches):
            a = launch.attrs
            if launch.kind == "linear":
                n = sum(a["widths"])
                k = types[a["weights"][0]].shape[1]
                bias = empty((n,), self.dtype) if any(a["biases"]) else None
                pw.linear[i] = (empty((n, k), torch.bfloat16), bias, True)
            elif launch.kind == "packed_linear":
                from specir.bf12 import pack
                n, k = sum(a["widths"]), types[a["weights"][0]].shape[1]
                bias = empty((n,), self.dtype) if any(a["biases"]) else None
                pw.packed[i] = (pack((torch.randn(n, k) * 0.02).to(torch.bfloat16)), bias)
            elif launch.kind == "vocab_scatter":  # the ids' inverse map (every id kept at position 0)
                pw.table[inverse_key(a["ids"])] = torch.zeros(int(a["vocab"]), dtype=torch.int32, device=self.device)
            else:
                for name in weight_names(launch).values():
                    pw.table[name] = empty(types[name].shape, self.dtype)
            if a.get("norm_weight"):  # a linear's RMSNorm prologue
                pw.table[a["norm_weight"]] = empty(types[a["norm_weight"]].shape, self.dtype)
        self.weights = pw
        self.ropes = {}
        for launch in self.program.launches:
            if "rope" in launch.attrs:
                key = (launch.attrs["rope"], launch.attrs["head_dim"])
                self.ropes.setdefault(key, RopeTable(*key, self.device))

    def rope_table(self, rope, head_dim):
        return self.ropes[(rope, head_dim)]


class _OneLayerCache:
    """KV cache stand-in: every layer shares one [1, KH, max_seq, D] pair."""

    def __init__(self, layers: dict, max_seq: int, dtype):
        import torch
        shapes = {}
        self.k, self.v = {}, {}
        for i, (kh, d) in layers.items():
            if (kh, d) not in shapes:
                shapes[(kh, d)] = (torch.zeros(1, kh, max_seq, d, dtype=dtype), torch.zeros(1, kh, max_seq, d, dtype=dtype))
            self.k[i], self.v[i] = shapes[(kh, d)]
        self.max_seq = max_seq

    def layer(self, i):
        return self.k[i], self.v[i]


def _compile_all(spec: str, arch: int, folder: Path) -> dict:
    import torch
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    from specir.load import load_pipeline
    from specir.step import ragged

    from .forward import ForwardInputs, StaticForward
    from .launch_configs import REPRESENTATIVE_CONTEXT
    from .kernels.accept import greedy_accept_tree
    from .kernels.argmax import argmax
    from .kernels.kv_cache import kv_compact
    from specir.step.interfaces import StepInfo


    pipeline = load_pipeline(spec)
    forwards = StepInfo(pipeline).forwards()
    compact = any(op.attrs.get("kv") == "compact" for op in pipeline.step.ops)
    compiled: dict[str, list] = {}
    original = JITFunction.run

    def offline_run(self, *args, grid, warmup, **kwargs):
        kernel = original(self, *args, grid=grid, warmup=True, **kwargs)
        name = f"{self.fn.__module__.rsplit('.', 1)[-1]}.{self.fn.__name__}"
        entries = compiled.setdefault(name, [])
        if all(k is not kernel for k in entries):
            entries.append(kernel)
        return kernel

    def no_gemm(x, weight, bias=None, out=None):  # cuBLAS-routed groups (gemm_route.py): no Triton kernel to emit
        return out if out is not None else x.new_empty(*x.shape[:-1], weight.shape[0])

    previous = driver._active
    original_linear = torch.nn.functional.linear
    driver.set_active(_OfflineDriver(arch))
    JITFunction.run = offline_run
    torch.nn.functional.linear = no_gemm
    try:
        for model in pipeline.used_models():
            stand_in = _StandIn(model)
            cache = _OneLayerCache(stand_in.program.layers, REPRESENTATIVE_CONTEXT, stand_in.dtype)
            for f in forwards if forwards else []:
                if f.model != model.name:
                    continue
                T = f.tokens
                if f.packed:  # T one-token rows of one request, as verify.packed builds them: grouped attention
                    inputs = ragged.allocate(T, f.mask_width, "cpu", requests=1)
                else:
                    inputs = ForwardInputs.allocate(1, T, "cpu", mask_width=f.mask_width or None,
                                                    offsets=f.purpose in ("draft", "tree-level"))
                logits = StaticForward(stand_in, cache, inputs).run()
                argmax(logits)
                if f.purpose == "verify":
                    ids = torch.zeros(1, T, dtype=torch.long)
                    greedy_accept_tree(ids, torch.zeros(1, T, dtype=torch.int32), ids, emitted=torch.zeros_like(ids))
                    if compact:
                        k_cache, v_cache = cache.layer(next(iter(cache.k)))
                        kv_compact(k_cache, v_cache, inputs.lens[:1], torch.zeros(1, T, dtype=torch.int32),
                                   torch.zeros(1, dtype=torch.int32))
    finally:
        JITFunction.run = original
        torch.nn.functional.linear = original_linear
        driver._active = previous
    files = {}
    for name, kernels in compiled.items():
        for n, kernel in enumerate(kernels):
            path = folder / f"{name}.{n}.ptx"
            path.write_text(kernel.asm["ptx"])
            files.setdefault(name, []).append(f"ptx/{path.name}")
    return files


def main(argv=None) -> int:
    spec, arch, folder = (argv or sys.argv[1:])[:3]
    files = _compile_all(spec, int(arch), Path(folder))
    print(json.dumps(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
