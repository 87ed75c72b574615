"""ATen ops and device->host synchronisations per decode step, by step segment, counted on the CPU.

    python bench/host_ops.py [--batch-sizes 1,8,32,64] [--steps 3] [--json out.json]

Builds the shipped zoo pair's pipeline (`specir init --target-model <zoo code-target> --drafter
<zoo code-drafter>`: a chain, k = 4) and three rewrites of it: `tree-verify{budget=64,topk=8,depth=6}`,
`batch-fusion{shrink=true,alpha=0.85}` (on the chain) and the tree + that batch-fusion, and the zoo
target with the n-gram proposer under batch-fusion (ngram-bf, the one with a host segment); runs each on
the torch reference step backend (CPU) at every batch size (greedy, code-completion prompts), one
warm-up decode step, then --steps steps counted and --steps more timed. Per step it reports, per
step segment (specir/step/program.py; the ops of each named):
- host segments (ops whose interfaces say needs_host: eager on a GPU, one kernel launch per ATen op):
  the ATen ops they run outside the forwards they launch through StepContext.launch (those are one
  graph replay each on a GPU; counted apart), the host copies into their static buffers included;
  views (no kernel) are left out;
- the device->host synchronisations among them: `_local_scalar_dense` (item / int / bool of a
  tensor), `nonzero`, `masked_select`, a boolean index (index / index_put with a bool mask: nonzero
  inside), `repeat_interleave` without output_size, `unique`, `bincount`, `equal`; `.cpu()`,
  `.tolist()`, `.numpy()` (TorchFunctionMode: on the CPU they dispatch nothing); and
  `torch.tensor(data, device=...)` from host data (a pageable host->device copy, which waits for
  the stream: counted as "upload");
- the same for device segments (a GPU captures each into one CUDA graph replay: for context only;
  on the CPU the reference backend also reads `n_feed.max()` in the drafter's catch-up, which a
  capturing backend does not) and for the step's work outside segments (the op variants and
  the engine's readback of the emitted tokens, one `.cpu()` per step for every pipeline);
- the host wall time of host segments minus their forwards (the timed steps, counters off): on
  the CPU this includes executing the ops, not just launching them.
The estimate column prices host-segment ops at US_PER_OP and syncs at US_PER_SYNC microseconds
(assumed GPU launch and pipeline-drain costs, not measured here). CPU counts, not a GPU measurement.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
import weakref

os.environ.setdefault("SPECIR_THREADS", "1")

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

TREE = "tree-verify{budget=64,topk=8,depth=6}"
FUSION = "batch-fusion{shrink=true,alpha=0.85}"
PIPELINES = {"chain": "", "tree": TREE, "chain-bf": FUSION, "tree-bf": f"{TREE},{FUSION}"}
# (drafter, passes): the n-gram proposer reads each request's token history (a host segment)
DRAFTERS = {"ngram-bf": ("ngram", "batch-fusion{shrink=false}")}  # every live request drafts: the host segment runs
US_PER_OP = 6.0  # assumed: one eager kernel launch on a GPU (host side), microseconds
US_PER_SYNC = 20.0  # assumed: one device->host synchronisation (pipeline drain + copy), microseconds
SYNC_OPS = {"_local_scalar_dense": "item", "nonzero": "nonzero", "masked_select": "masked_select",
            "_unique": "unique", "_unique2": "unique", "unique_dim": "unique", "unique_consecutive": "unique",
            "bincount": "bincount", "equal": "equal", "is_nonzero": "item"}
NO_KERNEL = {"empty", "empty_strided", "empty_like", "lift_fresh", "lift_fresh_copy", "_local_scalar_dense",
             "is_nonzero", "equal", "resize_"}  # allocations and host reads: no kernel of their own
HOST_READS = {"cpu", "tolist", "numpy"}
UPLOADS = {"tensor", "as_tensor", "asarray", "new_tensor"}
OUTSIDE = "outside"  # the step's work outside its segments


@dataclasses.dataclass
class Counts:
    ops: int = 0  # ATen ops that launch a kernel on a GPU (views and allocations left out)
    views: int = 0
    bytes: int = 0  # bytes of the tensors those ops return (what they write, roughly)
    bytes_by_name: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    syncs: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    names: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def _bool_index(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8) for t in (indices or ()))


def _written(name: str, args, out) -> int:
    """Bytes an op writes: its results' sizes, but for an in-place indexed write only the rows indexed."""
    if name in ("index_put", "index_put_", "_index_put_impl", "_index_put_impl_") and not _bool_index(args):
        dest, indices = args[0], [t for t in args[1] if t is not None]
        rows = torch.broadcast_shapes(*(t.shape for t in indices)).numel() if indices else 1
        inner = math.prod(dest.shape[i] for i, t in enumerate(args[1]) if t is None) * math.prod(dest.shape[len(args[1]):])
        return rows * inner * dest.element_size()
    return sum(t.nbytes for t in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(t, torch.Tensor))


class Counter:
    """Counts ATen ops (TorchDispatchMode) and host reads (TorchFunctionMode) into buckets: OUTSIDE,
    a segment's index, or ("forward", index) for the forwards a host segment launches. `observer`
    is the StepProgram hook; `launch` wraps StepContext.launch."""

    def __init__(self):
        self.counts: dict = collections.defaultdict(Counts)
        self.bucket = OUTSIDE
        self.last_read = None  # the tensor the last torch call's cpu() returned: its tolist() is no other sync
        counter = self

        class Dispatch(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                counter.aten(func, args, kwargs or {}, out)
                return out

        class Function(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                counter.function(func, args, kwargs, out)
                return out

        self.modes = (Function, Dispatch)

    def aten(self, func, args, kwargs, out) -> None:
        c = self.counts[self.bucket]
        name = func.overloadpacket.__name__
        kind = SYNC_OPS.get(name)
        if name in ("index", "index_put", "index_put_", "_index_put_impl", "_index_put_impl_") and _bool_index(args):
            kind = "bool-index"
        if name == "repeat_interleave" and kwargs.get("output_size") is None and func._overloadname.startswith("Tensor"):
            kind = "repeat_interleave"
        if kind:
            c.syncs[kind] += 1
        if func.is_view:
            c.views += 1
        elif name not in NO_KERNEL:
            c.ops += 1
            c.names[name] += 1
            written = _written(name, args, out)
            c.bytes += written
            c.bytes_by_name[name] += written

    def function(self, func, args, kwargs, out) -> None:
        name = getattr(func, "__name__", "")
        last, self.last_read = self.last_read, None
        if name in HOST_READS and args and isinstance(args[0], torch.Tensor):
            if name == "cpu" or last is None or last() is not args[0]:
                self.counts[self.bucket].syncs[name] += 1
            if name == "cpu" and isinstance(out, torch.Tensor):
                self.last_read = weakref.ref(out)
        elif name in UPLOADS and kwargs.get("device") is not None and args and not isinstance(args[0], torch.Tensor):
            self.counts[self.bucket].syncs["upload"] += 1

    @contextlib.contextmanager
    def active(self):
        with contextlib.ExitStack() as stack:
            for mode in self.modes:
                stack.enter_context(mode())
            yield

    @contextlib.contextmanager
    def observer(self, index, segment):
        outer, self.bucket = self.bucket, index
        try:
            yield
        finally:
            self.bucket = outer

    def wrap_launch(self, ctx):
        original = ctx.launch

        def launch(state, key, run):
            outer = self.bucket
            self.bucket = ("forward", outer)
            try:
                return original(state, key, run)
            finally:
                self.bucket = outer
        return launch


class Timer:
    """Host seconds per segment and per forward a host segment launches (counters off)."""

    def __init__(self):
        self.seconds = collections.Counter()
        self.bucket = OUTSIDE

    @contextlib.contextmanager
    def observer(self, index, segment):
        outer, self.bucket, start = self.bucket, index, time.perf_counter()
        try:
            yield
        finally:
            self.seconds[index] += time.perf_counter() - start
            self.bucket = outer

    def wrap_launch(self, ctx):
        original = ctx.launch

        def launch(state, key, run):
            start = time.perf_counter()
            try:
                return original(state, key, run)
            finally:
                self.seconds[("forward", self.bucket)] += time.perf_counter() - start
        return launch


@contextlib.contextmanager
def observing(decode, probe):
    """`probe`'s observer on the step program and its launch wrapper on the context, for a while."""
    program, ctx = decode.session.engine.program, decode.session.ctx
    program.observer, ctx.launch = probe.observer, probe.wrap_launch(ctx)
    try:
        yield
    finally:
        program.observer = None
        del ctx.launch


def zoo_pipelines(names=None) -> dict:
    from specir.load import load_pipeline
    from specir.pass_infra import PassManager, build_passes
    from specir.zoo.paths import zoo_model_dir

    def base(drafter: str):
        spec = subprocess.run([sys.executable, "-m", "specir.cli.main", "init", "--target-model",
                               str(zoo_model_dir("code-target")), "--drafter", drafter],
                              capture_output=True, text=True, check=True).stdout
        return load_pipeline("<init>", text=spec)

    wanted = {name: (str(zoo_model_dir("code-drafter")), passes) for name, passes in PIPELINES.items()}
    wanted.update(DRAFTERS)
    bases: dict = {}
    out = {}
    for name, (drafter, passes) in wanted.items():
        if names is None or name in names:
            if drafter not in bases:
                bases[drafter] = base(drafter)
            out[name] = PassManager(build_passes(passes)).run(bases[drafter]) if passes else bases[drafter]
    return out


def zoo_prompts(n: int, tokens: int) -> list[list[int]]:
    """n prompts of the code-completion workload (last `tokens` tokens each), cycled."""
    from specir.runtime.prompts import workload_records
    from specir.runtime.tokenizer import encode
    from specir.zoo.paths import zoo_model_dir
    folder = str(zoo_model_dir("code-target"))
    rows = [encode(folder, r["prompt"])[-tokens:] for r in workload_records("code-completion", None)]
    return [rows[i % len(rows)] for i in range(n)]


def open_decode(engine, prompts, max_new: int):
    decode = engine.open(len(prompts), engine.rows_needed(max(map(len, prompts)), max_new), sampling=False)
    decode.add_many([(p, max_new, 0.0, 0) for p in prompts])
    return decode


def measure(engine, prompts, *, warm: int = 1, steps: int = 3, max_new: int = 128) -> dict:
    """Counts and host times per decode step of one batch (see the module docstring), and the
    tokens each request emitted over all warm + 2 x steps steps (to compare with an unobserved run)."""
    decode = open_decode(engine, prompts, max_new)
    for _ in range(warm):
        decode.step()
    counter, live = Counter(), []
    with observing(decode, counter):
        for _ in range(steps):
            live.append(decode.active())
            with counter.active():
                decode.step()
    timer = Timer()
    with observing(decode, timer):
        for _ in range(steps):
            start = time.perf_counter()
            decode.step()
            timer.seconds["step"] += time.perf_counter() - start
    segments = engine.program.segments
    out = {"live": sum(live) / steps, "segments": [], "tokens": [r.tokens[len(p):] for r, p in zip(decode.requests, prompts)]}
    for index, seg in enumerate(segments):
        c, f = counter.counts[index], counter.counts[("forward", index)]
        out["segments"].append({
            "index": index, "host": seg.host, "ops": [op.name for op, _ in seg.ops],
            "aten_ops": c.ops / steps, "views": c.views / steps, "syncs": sum(c.syncs.values()) / steps,
            "sync_kinds": {k: v / steps for k, v in sorted(c.syncs.items())}, "mb_written": c.bytes / steps / 1e6,
            "mb_by_op": {k: v / steps / 1e6 for k, v in c.bytes_by_name.most_common() if v},
            "op_names": {k: v / steps for k, v in c.names.most_common()},
            "forward_ops": f.ops / steps, "forward_syncs": sum(f.syncs.values()) / steps,
            "ms": 1e3 * timer.seconds[index] / steps, "forward_ms": 1e3 * timer.seconds[("forward", index)] / steps})
    o = counter.counts[OUTSIDE]
    out["outside"] = {"aten_ops": o.ops / steps, "syncs": sum(o.syncs.values()) / steps,
                      "sync_kinds": {k: v / steps for k, v in sorted(o.syncs.items())}}
    out["step_ms"] = 1e3 * timer.seconds["step"] / steps
    out["outside"]["ms"] = out["step_ms"] - sum(s["ms"] for s in out["segments"])
    host = [s for s in out["segments"] if s["host"]]
    out["host_ops"] = sum(s["aten_ops"] for s in host)
    out["host_syncs"] = sum(s["syncs"] for s in host)
    out["host_ms"] = sum(s["ms"] - s["forward_ms"] for s in host)
    out["host_mb"] = sum(s["mb_written"] for s in host)
    out["device_ops"] = sum(s["aten_ops"] for s in out["segments"] if not s["host"])
    out["device_syncs"] = sum(s["syncs"] for s in out["segments"] if not s["host"])
    out["estimate_ms"] = (out["host_ops"] * US_PER_OP + out["host_syncs"] * US_PER_SYNC) / 1e3
    return out


def decode_tokens(engine, prompts, n_steps: int, max_new: int = 128) -> list[list[int]]:
    """The tokens each request emits over n_steps decode steps, nothing observed."""
    decode = open_decode(engine, prompts, max_new)
    for _ in range(n_steps):
        decode.step()
    return [r.tokens[len(p):] for r, p in zip(decode.requests, prompts)]


def _segments(program) -> str:
    return "; ".join(f"{'host' if s.host else 'device'} [{', '.join(op.name for op, _ in s.ops)}]"
                     for s in program.segments)


def _n(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def table(rows) -> list[str]:
    lines = [f"| pipeline | batch | live | host-segment ATen ops / step | syncs / step (host segments) | "
             f"host-segment MB written / step | device-segment ATen ops / step (syncs) | "
             f"outside segments: ops (syncs), CPU ms | host ms / step (CPU) | "
             f"estimate ms (ops x {US_PER_OP:g} us + syncs x {US_PER_SYNC:g} us) |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for name, b, r in rows:
        kinds = ", ".join(f"{k} {_n(v)}" for s in r["segments"] if s["host"] for k, v in s["sync_kinds"].items())
        o = r["outside"]
        lines.append(f"| {name} | {b} | {_n(r['live'])} | {_n(r['host_ops'])} | {_n(r['host_syncs'])}"
                     f"{f' ({kinds})' if kinds else ''} | {r['host_mb']:.1f} | {_n(r['device_ops'])} "
                     f"({_n(r['device_syncs'])}) | {_n(o['aten_ops'])} ({_n(o['syncs'])}), {o['ms']:.2f} | "
                     f"{r['host_ms']:.2f} | {r['estimate_ms']:.2f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-sizes", default="1,8,32,64")
    ap.add_argument("--pipelines", default=",".join(PIPELINES))
    ap.add_argument("--steps", type=int, default=3, help="decode steps counted (and as many timed) per row")
    ap.add_argument("--prompt-tokens", type=int, default=64, help="last tokens of each prompt kept")
    ap.add_argument("--json", help="write every row's per-segment counts here")
    ap.add_argument("--table-from", help="only print the table of a --json file written before")
    args = ap.parse_args(argv)
    if args.table_from:
        with open(args.table_from) as f:
            print("\n".join(table([(r["pipeline"], r["batch"], r) for r in json.load(f)])))
        return 0
    from specir.runtime.session import make_engine
    torch.set_num_threads(int(os.environ["SPECIR_THREADS"]))
    batches = [int(b) for b in args.batch_sizes.split(",")]
    pipes = zoo_pipelines(args.pipelines.split(","))
    prompts = zoo_prompts(max(batches), args.prompt_tokens)
    rows, records = [], []
    for name, p in pipes.items():
        engine = make_engine(p, "reference", "cpu", None)
        print(f"{name}: {_segments(engine.program)}", flush=True)
        for op in p.step.ops:
            if op.name == "batch.budget":
                print(f"  batch.budget tokens at 1, 8, 32, 64 live: "
                      f"{[op.attrs['tokens'][min(b, len(op.attrs['tokens'])) - 1] for b in (1, 8, 32, 64)]}")
        for b in batches:
            r = measure(engine, prompts[:b], steps=args.steps)
            r.pop("tokens")
            rows.append((name, b, r))
            records.append({"pipeline": name, "passes": PIPELINES[name], "batch": b, **r})
            for s in r["segments"]:
                if s["host"]:
                    print(f"  b{b} host segment {s['index']} {s['ops']}: {s['aten_ops']:g} ops "
                          f"{dict(list(s['op_names'].items())[:12])}, syncs {s['sync_kinds']}, forward ops "
                          f"{s['forward_ops']:g}, {s['mb_written']:.1f} MB written "
                          f"{ {k: round(v, 1) for k, v in list(s['mb_by_op'].items())[:4]} }, "
                          f"{s['ms'] - s['forward_ms']:.2f} ms + forward {s['forward_ms']:.2f} ms", flush=True)
                else:
                    print(f"  b{b} device segment {s['index']} {s['ops']}: {s['aten_ops']:g} ops, syncs "
                          f"{s['sync_kinds']} (CPU backend)", flush=True)
    print()
    print("\n".join(table(rows)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
