"""GEMV / skinny-GEMM benchmark: Triton bf16 and BF12 kernels vs cuBLAS, against copy bandwidth.

    python bench/gemv.py --out OUT [--quick] [--tune] [--ms 1,8,64,65] [--as-launched [8b|drafter]]

- copy bandwidth: device-to-device copy of a 2 GiB buffer, read + write bytes counted;
- Llama-3.1-8B linear shapes (q/o, k/v, gate/up, down, lm_head) at M = 1 (GEMV) and the skinny
  GEMMs M = 8..128; each implementation's GB/s counts its own bytes (weights in its format +
  x + y) and is compared with the copy bandwidth;
- every (shape, M): BF12 output bits == bf16-kernel output bits, checked on the GPU;
- weights: Gaussian N(0, 0.02) bf16, several copies rotated so that L2 never serves them;
  timing: a CUDA graph of back-to-back calls over the copies, replayed; median per call.
- `--tune` (instead of the benchmark): sweeps GEMV launch parameters per shape and prints the
  best (for the table in backends/triton/kernels/linear_config.py).
Writes OUT/gemv.json (or OUT itself if it ends in .json) and prints a markdown table last.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

SHAPES = {  # name: (N, K) of w[N, K]
    "q/o 4096x4096": (4096, 4096),
    "k/v 1024x4096": (1024, 4096),
    "gate/up 14336x4096": (14336, 4096),
    "down 4096x14336": (4096, 14336),
    "lm_head 128256x4096": (128256, 4096),
}
# the matrices as a pipeline's forward launches them, qkv and gate+up grouped (`--as-launched`): the 8B target's,
# and the 3-layer 1B-width drafter's (`--as-launched drafter`; its head cut to a 32768-id draft vocabulary)
LAUNCHED = {"8b": {"qkv 6144x4096": (6144, 4096), "o 4096x4096": (4096, 4096),
                   "gate+up 28672x4096": (28672, 4096), "down 4096x14336": (4096, 14336),
                   "lm_head 128256x4096": (128256, 4096)},
            "drafter": {"qkv 3072x2048": (3072, 2048), "o 2048x2048": (2048, 2048),
                        "gate+up 16384x2048": (16384, 2048), "down 2048x8192": (2048, 8192),
                        "head 32768x2048": (32768, 2048)}}
MS = (1, 8, 16, 32, 64, 128)
L2_BYTES = 60 * 2**20


def copy_bandwidth(nbytes: int = 2 * 2**30) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + bytes written): specir calibrate's measurement
    (calibration.gpu_copy_bandwidth), median of 15."""
    from specir.calibration import gpu_copy_bandwidth
    return gpu_copy_bandwidth(nbytes, repeats=15) / 1e9


def graph_timer(calls, replays: int = 12):
    """Run `calls` (zero-argument functions) once to warm up (compile, allocate split-K counters),
    capture them in order as one CUDA graph, and return a function that replays it `replays` times
    and gives the median seconds per replay."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        for c in calls:
            c()
        with torch.cuda.graph(graph, stream=stream):
            for c in calls:
                c()
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()

    def measure() -> float:
        times = []
        for _ in range(replays):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        return statistics.median(times)
    return measure


def time_calls(calls, replays: int = 12) -> float:
    """Median seconds per call of a CUDA graph running `calls` (zero-argument functions) in order."""
    return graph_timer(calls, replays)() / len(calls)


def parse_variant(text: str) -> tuple[str, dict]:
    """'bf12:weight_cache=cg,maxnreg=128' -> ('bf12', {'weight_cache': 'cg', 'maxnreg': 128}): order-neutral
    GEMV fields only (linear_config.GEMV_ORDER_NEUTRAL), ints where the value is one."""
    from specir.backends.triton.kernels.linear_config import GEMV_ORDER_NEUTRAL
    fmt, _, rest = text.partition(":")
    if fmt not in ("bf16", "bf12") or not rest:
        raise SystemExit(f"--variant {text!r}: expected FMT:FIELD=VALUE,... with FMT bf16 or bf12")
    fields = {}
    for item in rest.split(","):
        key, _, value = item.partition("=")
        if key == "overlap_iters" or not value:  # the variants run plain launches; overlap has --iters
            raise SystemExit(f"--variant {text!r}: {item!r} needs FIELD=VALUE, FIELD not overlap_iters (see --iters)")
        if key not in GEMV_ORDER_NEUTRAL:
            raise SystemExit(f"--variant {text!r}: {key!r} is not an order-neutral GEMV field "
                             f"({', '.join(sorted(GEMV_ORDER_NEUTRAL))})")
        fields[key] = int(value) if value.lstrip("-").isdigit() else {"true": True, "false": False}.get(value, value)
    return fmt, fields


def make_weights(n: int, k: int, seed: int):
    """(bf16 copies, BF12 copies): enough copies that two passes over them overflow L2 threefold."""
    from specir.bf12 import pack

    g = torch.Generator(device="cuda").manual_seed(seed)
    w = (torch.randn(n, k, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
    packed = pack(w)
    copies = max(2, math.ceil(3 * L2_BYTES / (n * k * 2)))
    ws = [w] + [w.clone() for _ in range(copies - 1)]
    ps = [packed] + [replace(packed, mant=packed.mant.clone(), code=packed.code.clone(), base=packed.base.clone(),
                             esc=packed.esc.clone()) for _ in range(copies - 1)]
    return ws, ps


def mma_gemv_config(n: int, k: int):
    """The M = 1 configuration on the MMA path, with the GEMV's split-K."""
    from specir.backends.triton.kernels.linear_config import LinearConfig, choose

    return LinearConfig("gemm", 64, 1, choose(1, n, k).split, 16, 4, num_stages=3, swap_ab=True)


def bench_shape(name, n, k, ms, copy_gbps, seed, rows):
    from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
    from specir.backends.triton.kernels.linear_config import choose
    from specir.bf12 import bits_per_weight

    ws, ps = make_weights(n, k, seed)
    bf12_bytes = ps[0].nbytes()
    for m in ms:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        io = (m * k + m * n) * 2
        y16 = linear_bf16(x, ws[0])
        y12 = linear_bf12(x, ps[0])
        equal = bool(torch.equal(y16.view(torch.int16), y12.view(torch.int16)))
        ref = (x.float() @ ws[0].float().T)
        rel = ((y16.float() - ref).abs().max() / ref.abs().max()).item()
        impls = {
            "cublas": (lambda w: (lambda: torch.nn.functional.linear(x, w)), ws, n * k * 2),
            "triton-bf16": (lambda w: (lambda: linear_bf16(x, w)), ws, n * k * 2),
            "triton-bf12": (lambda p: (lambda: linear_bf12(x, p)), ps, bf12_bytes),
        }
        if m == 1:  # the alternative M = 1 path: y^T = w x^T on tensor cores (see linear_config.GEMV_ON_MMA)
            mma = mma_gemv_config(n, k)
            y16m, y12m = linear_bf16(x, ws[0], config=mma), linear_bf12(x, ps[0], config=mma)
            equal = equal and bool(torch.equal(y16m.view(torch.int16), y12m.view(torch.int16)))
            impls["triton-bf16-mma"] = (lambda w: (lambda: linear_bf16(x, w, config=mma)), ws, n * k * 2)
            impls["triton-bf12-mma"] = (lambda p: (lambda: linear_bf12(x, p, config=mma)), ps, bf12_bytes)
        for impl, (make, weights, wbytes) in impls.items():
            t = time_calls([make(w) for w in weights] * 2)
            gbps = (wbytes + io) / t / 1e9
            rows.append(dict(shape=name, N=n, K=k, M=m, impl=impl, us=t * 1e6, gbps=gbps,
                             pct_copy=100 * gbps / copy_gbps, weight_bytes=wbytes,
                             bits_per_weight=(bits_per_weight(ps[0]) if impl == "triton-bf12" else 16.0),
                             bf12_equals_bf16=equal, bf16_rel_err=rel,
                             config=(None if impl == "cublas" else asdict(mma) if impl.endswith("mma")
                                     else asdict(choose(m, n, k, impl.split("-")[1])))))
        print(f"  {name} M={m}: " + ", ".join(f"{r['impl']} {r['us']:.1f}us {r['pct_copy']:.0f}%"
                                               for r in rows[-len(impls):]) + f", bits equal: {equal}", flush=True)
    del ws, ps
    torch.cuda.empty_cache()


def tune_shape(name, n, k, copy_gbps, seed, out):
    """Sweep GEMV launch parameters; record every candidate and print the best per format."""
    from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
    from specir.backends.triton.kernels.linear_config import LinearConfig, choose

    ws, ps = make_weights(n, k, seed)
    x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
    groups = -(-k // 128)
    table_split = choose(1, n, k).split
    splits = [s for s in (table_split // 2, table_split, table_split * 2) if 1 <= s <= min(groups, 16)]
    best = {}
    for fmt, fn, weights, wbytes in (("bf16", linear_bf16, ws, n * k * 2), ("bf12", linear_bf12, ps, ps[0].nbytes())):
        candidates = [LinearConfig("gemv", bn, 1, split, num_warps=warps, num_stages=stages, prefetch=prefetch)
                      for bn in (32, 64) for split in splits
                      for warps, stages, prefetch in ((4, 1, True), (4, 2, True), (4, 1, False), (8, 1, True))]
        # and M = 1 on the MMA path (y^T = w x^T, x padded to 16 columns)
        candidates += [replace(mma_gemv_config(n, k), split=split) for split in splits]
        for cfg in candidates:
            try:
                t = time_calls([(lambda w=w: fn(x, w, config=cfg)) for w in weights] * 2, replays=6)
            except Exception as exc:  # a config that does not compile or fit
                print(f"    skip {cfg}: {type(exc).__name__}", flush=True)
                continue
            pct = 100 * wbytes / t / 1e9 / copy_gbps
            out.append(dict(shape=name, fmt=fmt, config=asdict(cfg), us=t * 1e6, pct_copy=pct))
            if pct > best.get(fmt, (0, None))[0]:
                best[fmt] = (pct, cfg)
    for fmt, (pct, cfg) in best.items():
        print(f"  TUNE {name} {fmt}: {pct:.1f}% of copy with {cfg}", flush=True)
    del ws, ps
    torch.cuda.empty_cache()


def markdown(rows, copy_gbps) -> str:
    lines = [f"copy bandwidth: {copy_gbps:.0f} GB/s (read + write); % = GB/s in the format's own bytes / copy",
             "", "| shape | M | cuBLAS us | bf16 us | BF12 us | cuBLAS % | bf16 % | BF12 % | BF12/bf16 speedup "
             "| M=1 on MMA: bf16 % / BF12 % | bits equal |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {}
    for r in rows:
        by.setdefault((r["shape"], r["M"]), {})[r["impl"]] = r
    for (shape, m), d in by.items():
        c, b, p = d["cublas"], d["triton-bf16"], d["triton-bf12"]
        mma = (f"{d['triton-bf16-mma']['pct_copy']:.0f} / {d['triton-bf12-mma']['pct_copy']:.0f}"
               if "triton-bf12-mma" in d else "")
        lines.append(f"| {shape} | {m} | {c['us']:.1f} | {b['us']:.1f} | {p['us']:.1f} | {c['pct_copy']:.0f} | "
                     f"{b['pct_copy']:.0f} | {p['pct_copy']:.0f} | {b['us'] / p['us']:.2f}x | {mma} | "
                     f"{'yes' if p['bf12_equals_bf16'] else 'NO'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder (writes gemv.json) or .json file")
    ap.add_argument("--quick", action="store_true", help="M = 1 and M = 16 on q/o, gate/up and lm_head only")
    ap.add_argument("--tune", action="store_true",
                    help="instead of the benchmark, sweep GEMV launch parameters (a few minutes)")
    ap.add_argument("--ms", default="", help="row counts, comma-separated (default 1,8,16,32,64,128; --quick 1,16); "
                    "a tree verify launches budget + 1 rows")
    ap.add_argument("--as-launched", nargs="?", const="8b", choices=sorted(LAUNCHED),
                    help="the matrices as a pipeline launches them (qkv and gate+up grouped), not one per projection: "
                         "the 8B target's (the default) or the drafter's")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/gemv.py needs a CUDA GPU", file=sys.stderr)
        return 2
    out = Path(args.out)
    path = out if out.suffix == ".json" else out / "gemv.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    copy_gbps = copy_bandwidth()
    print(f"copy bandwidth {copy_gbps:.0f} GB/s on {torch.cuda.get_device_name()}", flush=True)
    table = LAUNCHED[args.as_launched] if args.as_launched else SHAPES
    shapes = {k: v for k, v in table.items()
              if not args.quick or k.split()[0] in ("q/o", "gate/up", "gate+up", "o", "lm_head")}
    ms = tuple(int(m) for m in args.ms.split(",")) if args.ms else (1, 16) if args.quick else MS
    rows, tune = [], []
    if args.tune:
        for name, (n, k) in shapes.items():
            tune_shape(name, n, k, copy_gbps, args.seed, tune)
        path.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), copy_gbps=copy_gbps, tune=tune), indent=1))
        print(f"wrote {path}")
        return 0
    for name, (n, k) in shapes.items():
        bench_shape(name, n, k, ms, copy_gbps, args.seed, rows)
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                  triton=__import__("triton").__version__, copy_gbps=copy_gbps, rows=rows, tune=tune,
                  all_bits_equal=all(r["bf12_equals_bf16"] for r in rows), seconds=time.time() - start)
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path} in {time.time() - start:.0f}s")
    print(markdown(rows, copy_gbps))
    return 0 if result["all_bits_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
