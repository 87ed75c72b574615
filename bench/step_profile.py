"""Where one decode step's time goes on the GPU: torch.profiler over a `specir bench`-shaped decode.

    python bench/step_profile.py BUILD [BUILD ...] --batch-size 64 --workload code-completion \
        --limit 8 --max-new-tokens 96 --out OUT

For each build and batch size: warms the engine up exactly as `specir bench` does (kernels and graphs
built first), times two generates of the first batch of the workload's prompts (the first is what
`specir bench` times; a gap between them is first-time work inside the timed decode), then decodes
the batch once more with only its decode steps under torch.profiler (CPU and CUDA activity; kernels
inside CUDA-graph replays are recorded by CUPTI). Reports per step: the decode wall time, the summed
GPU kernel time (their gap is host time the GPU waits for: syncs, Python, launches outside a
graph), and the kernels grouped by name with their share. `--ar`: AR decoding of the first build's
target too (stock, as `specir bench`'s baseline); `--ar-as-built`: of that target as the build
compiled it (its fusions). Then one more decode with CUDA events around each step segment (StepProgram.observer):
each segment's ops and its mean GPU-stream milliseconds per step, so draft, verify, accept and commit
are priced apart (a segment's time includes the GPU waiting on its host work); `--per-op` prices every
op apart too (the step re-lowered one op per segment, its own captures). Writes OUT/profile.json and a
Chrome trace per row; prints a short table last.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _kernel_group(name: str) -> str:
    """A kernel's family: Triton kernels keep their function name, library kernels a short stem."""
    name = re.sub(r"_[0-9]+d[0-9]+d?.*$", "", name)
    name = re.sub(r"\(.*$", "", name)
    return name[:80]


def _open_decode(engine, batch, max_new, sync):
    """A greedy decode session of `batch` (prompts added, prefill not yet run), as `specir bench` seeds it."""
    from specir.step.engine import request_seed
    rows = engine.rows_needed(max(len(p) for p in batch), max_new)
    decode = engine.open(len(batch), rows, False)
    decode.add_many([(list(p), max_new, 0.0, request_seed(0, i)) for i, p in enumerate(batch)])
    sync()
    return decode


def _decode_profiled(engine, batch, max_new, sync):
    """One generate of `batch` with only its decode steps under torch.profiler (prefill outside)."""
    from torch.profiler import ProfilerActivity, profile
    decode = _open_decode(engine, batch, max_new, sync)
    first_time = engine.backend.setup_s
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        steps = 0
        while decode.active():
            decode.step()
            steps += 1
        sync()
        wall = time.perf_counter() - start
    return prof, wall, steps, decode.requests, engine.backend.setup_s - first_time


def _observed_decode(engine, batch, max_new, sync, observer) -> int:
    """One decode of `batch` with `observer` on the engine's program; the number of steps."""
    decode = _open_decode(engine, batch, max_new, sync)
    engine.program.observer, steps = observer, 0
    try:
        while decode.active():
            decode.step()
            steps += 1
    finally:
        engine.program.observer = None
    sync()
    return steps


def _segments(engine, batch, max_new, sync, per_op: bool = False) -> list[dict]:
    """One more decode of `batch` with CUDA events around every step segment: per segment its ops,
    host or device, and mean ms per step (event to event on the current stream). `per_op`: the step
    re-lowered with every op a segment of its own (StepProgram(per_op=True)), decoded twice unobserved
    (its ops' first eager runs and captures) and then measured, so draft, verify, accept and commit
    are priced apart; the engine's own program is put back afterwards."""
    import contextlib

    import torch
    from specir.step.program import StepProgram
    if not torch.cuda.is_available():
        return []
    marks: list[tuple[int, object, object]] = []

    @contextlib.contextmanager
    def observer(index, segment):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        yield
        b.record()
        marks.append((index, a, b))

    own = engine.program
    if per_op:
        engine.program = StepProgram(own.pipeline, own.backend, per_op=True)
    try:
        for _ in range(2 if per_op else 0):  # every op's eager run and capture, a late step's variant too
            _observed_decode(engine, batch, max_new, sync, None)
        steps = _observed_decode(engine, batch, max_new, sync, observer)
        described = engine.program.describe()
    finally:
        engine.program = own
    totals: dict[int, float] = {}
    for index, a, b in marks:
        totals[index] = totals.get(index, 0.0) + a.elapsed_time(b)
    return [{"segment": i, "ops": described[i]["ops"], "host": described[i]["host"],
             "ms_per_step": totals.get(i, 0.0) / max(steps, 1)} for i in range(len(described))]


def kernel_groups(prof, steps: int) -> tuple[float, list[dict]]:
    """(GPU ms of every kernel, memcpy and memset, the 40 costliest groups by name); `launch_count`
    gives their number."""
    from torch.autograd import DeviceType
    kernels: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type == DeviceType.CUDA:  # a kernel, memcpy or memset as the GPU ran it
            g = kernels.setdefault(_kernel_group(ev.name), [0.0, 0])
            g[0] += ev.time_range.elapsed_us() / 1e3  # ms
            g[1] += 1
    gpu_ms = sum(v[0] for v in kernels.values())
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])
    return gpu_ms, [{"name": k, "ms_per_step": v[0] / steps, "launches_per_step": v[1] / steps,
                     "share": v[0] / max(gpu_ms, 1e-9)} for k, v in top[:40]]


def launch_count(prof) -> int:
    """The kernels, memcpys and memsets the GPU ran under `prof`."""
    from torch.autograd import DeviceType
    return sum(1 for ev in prof.events() if ev.device_type == DeviceType.CUDA)


def profile_engine(name: str, engine, prompts, batch_size: int, max_new: int, out: str, per_op: bool = False) -> dict:
    """Warm-up as `specir bench` does, two timed generates (the first is what bench times), then
    one decode under the profiler."""
    import torch

    from specir.runtime.bench import _batches, warm_up
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    warm_up(engine, prompts, batch_size, max_new)
    batch = _batches(prompts, batch_size)[0]
    runs = []
    for _ in range(2):
        setup0 = engine.setup_s
        results = engine.generate(batch, max_new)
        runs.append({"decode_s": engine.timings["decode_s"], "setup_s_added": engine.setup_s - setup0,
                     "steps": max(len(r.accept_lengths) for r in results),
                     "tokens": sum(len(r.tokens) for r in results)})
    prof, wall, steps, requests, setup_added = _decode_profiled(engine, batch, max_new, sync)
    gpu_ms, kernels = kernel_groups(prof, steps)
    segments = _segments(engine, batch, max_new, sync)
    op_segments = _segments(engine, batch, max_new, sync, per_op=True) if per_op else []
    tag = f"{name}-b{batch_size}"
    try:
        prof.export_chrome_trace(os.path.join(out, f"trace-{tag}.json"))
    except Exception as e:  # a trace is a convenience; the table below is the result
        print(f"{tag}: no chrome trace ({e})", file=sys.stderr)
    tokens = sum(len(r.generated) for r in requests)
    return {"build": name, "batch_size": batch_size, "runs": runs, "steps": steps, "tokens": tokens,
            "tau": tokens / max(sum(len(r.accept_lengths) for r in requests), 1),
            "profiled_decode_s": wall, "profiled_setup_s": setup_added,
            "step_ms": 1e3 * wall / steps, "gpu_ms_per_step": gpu_ms / steps,
            "host_gap_ms_per_step": 1e3 * wall / steps - gpu_ms / steps,
            "launches_per_step": launch_count(prof) / steps, "kernels": kernels,
            "segments": segments, "op_segments": op_segments}


def profile_build(build: str, batch_sizes: list[int], workload: str, limit: int, max_new: int, out: str,
                  with_ar: bool, ar_as_built: bool = False, per_op: bool = False) -> list[dict]:
    from specir.cli.common_run import read_prompts
    from specir.runtime.baseline import ar_pipeline, target_name
    from specir.runtime.session import open_session
    from specir.step.engine import StepEngine

    session = open_session(build)
    args = argparse.Namespace(workload=workload, prompts=None, limit=limit, max_new_tokens=max_new)
    tgt = session.pipeline.model(target_name(session.pipeline))
    _, prompts = read_prompts(args, str(session.target_folder()), tgt.graph.result_type.width,
                              tgt.attrs.get("max_position"), limit=limit)
    engine = session.engine()
    name = os.path.basename(build.rstrip("/"))
    rows = [profile_engine(name, engine, prompts, bs, max_new, out, per_op) for bs in batch_sizes]
    if with_ar:
        ar = StepEngine(ar_pipeline(session.pipeline), engine.backend, base=session.base)
        rows += [profile_engine("ar", ar, prompts, bs, max_new, out, per_op) for bs in batch_sizes]
    if ar_as_built:  # the target as the build compiled it (its fusions), where `specir bench`'s AR is stock
        ar = StepEngine(ar_pipeline(session.pipeline, stock=False), engine.backend, base=session.base)
        rows += [profile_engine("ar-as-built", ar, prompts, bs, max_new, out, per_op) for bs in batch_sizes]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("builds", nargs="+")
    ap.add_argument("--batch-size", default="64")
    ap.add_argument("--workload", default="code-completion")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ar", action="store_true", help="also profile AR decoding of the first build's target")
    ap.add_argument("--ar-as-built", action="store_true",
                    help="also profile AR decoding of the first build's target with the build's passes (its fusions)")
    ap.add_argument("--per-op", action="store_true",
                    help="also price every step op apart (the step re-lowered one op per segment: draft, verify, ...)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    sizes = [int(x) for x in a.batch_size.split(",")]
    for i, build in enumerate(a.builds):
        t0 = time.time()
        try:
            got = profile_build(build, sizes, a.workload, a.limit, a.max_new_tokens, a.out, with_ar=i == 0 and a.ar,
                                ar_as_built=i == 0 and a.ar_as_built, per_op=a.per_op)
        except Exception as e:  # one build's failure leaves the others' rows
            import traceback
            traceback.print_exc()
            got = [{"build": build, "error": f"{type(e).__name__}: {e}"}]
        for row in got:
            row["wall_s"] = round(time.time() - t0, 1)
        rows += got
        with open(os.path.join(a.out, "profile.json"), "w") as f:
            json.dump(rows, f, indent=1)
    for r in rows:
        if "error" in r:
            print(f"{r['build']}: {r['error']}")
            continue
        runs = ", ".join(f"{x['decode_s'] * 1e3:.0f} ms / {x['steps']} steps (+{x['setup_s_added']:.2f} s setup)"
                         for x in r["runs"])
        print(f"\n{r['build']} b{r['batch_size']}: generate 1, 2: {runs}; profiled decode: step {r['step_ms']:.2f} ms, "
              f"GPU {r['gpu_ms_per_step']:.2f} ms in {r.get('launches_per_step', 0):.0f} launches, "
              f"host gap {r['host_gap_ms_per_step']:.2f} ms, tau {r['tau']:.2f}, "
              f"steps {r['steps']}")
        for g in r.get("segments", []):
            print(f"  segment {g['segment']} ({'host' if g['host'] else 'device'}) {g['ms_per_step']:7.3f} ms  "
                  f"{' '.join(g['ops'])}")
        for g in r.get("op_segments", []):
            where = "host" if g["host"] else "device"
            print(f"  op {g['segment']:2d} ({where}) {g['ms_per_step']:7.3f} ms  {' '.join(g['ops'])}")
        for k in r["kernels"][:10]:
            print(f"  {k['ms_per_step']:7.3f} ms {k['launches_per_step']:6.1f}x {100 * k['share']:5.1f}%  {k['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
