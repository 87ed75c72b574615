"""Time the TVM CPU kernels against torch on this machine; print a markdown table.

    python bench/cpu_kernels.py [--shape 1b|small|all] [--out FILE] [--cache DIR] [--sweep]

Shapes: "1b" is a ~1B-class Llama (hidden 2048, intermediate 8192, 32 heads / 8 kv heads,
head_dim 64); "small" is hidden 256 (intermediate 1024, 4 heads / 2 kv heads, head_dim 64).

GEMV rows report the weight bytes read per second. Every linear row cycles through enough
copies of its weight matrix (>= 3x the L3 size, at most 16 copies) that each call of the 1b
shape reads from DRAM, as a decode step does, not from cache (the small shape's matrices stay in
L3, as a small model's would). The reference bandwidths are measured here too: `copy` is a 256 MiB torch
copy counting read + write bytes (the design brief's "copy bandwidth"), `read` a 256 MiB fp32
sum. Times are the median of 7 runs; "best" is the fastest run (the machine may be shared:
the load average is printed). `tvm naive` is the same linear computation compiled without a
schedule (serial scalar loops): what the schedule buys. `--sweep` times register tiles of the
linear kernel (how `linear.choose_tile` was picked).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from specir.backends.tvm import reference as ref
from specir.backends.tvm.kernels import CPUKernels
from specir.backends.tvm.linear import LinearTile, linear

SHAPES = {
    "1b": dict(hidden=2048, inter=8192, heads=32, kv_heads=8, head_dim=64),
    "small": dict(hidden=256, inter=1024, heads=4, kv_heads=2, head_dim=64),
}
POOL_BYTES = 96 << 20  # >= 3x this machine's 32 MiB L3
MAX_COPIES = 16  # small matrices: a small model's weights sit in L3 anyway
REPS = 7


def timed(fn, iters: int) -> tuple[float, float]:
    """(median, best) seconds per call over REPS runs of `iters` calls, after one warm-up run."""
    for _ in range(iters):
        fn()
    runs = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        runs.append((time.perf_counter() - t0) / iters)
    return statistics.median(runs), min(runs)


def cycling(fn, pool):
    """A no-argument callable that calls fn(item) on the pool's items in turn."""
    state = {"i": 0}

    def call():
        item = pool[state["i"] % len(pool)]
        state["i"] += 1
        return fn(item)

    return call


def bandwidths() -> dict[str, float]:
    src = torch.empty(256 << 20, dtype=torch.uint8).random_()
    dst = torch.empty_like(src)
    med, _ = timed(lambda: dst.copy_(src), 3)
    copy = 2 * src.numel() / med
    flt = src.view(torch.float32)
    med, _ = timed(lambda: flt.sum(), 3)
    return {"copy": copy, "read": src.numel() / med}


class Table:
    def __init__(self, bw):
        self.bw = bw
        self.rows = []

    def add(self, group, name, impl, med, best, nbytes=None, flops=None):
        gbs = f"{nbytes / med / 1e9:.2f}" if nbytes else ""
        pct = f"{100 * nbytes / med / self.bw['copy']:.0f}%" if nbytes else ""
        gfl = f"{flops / med / 1e9:.1f}" if flops else ""
        self.rows.append((group, name, impl, f"{med * 1e6:.1f}", f"{best * 1e6:.1f}", gbs, pct, gfl))
        print(" | ".join(self.rows[-1]), file=sys.stderr, flush=True)

    def markdown(self) -> str:
        head = ("shape", "kernel", "impl", "median us", "best us", "GB/s (median)", "% of copy BW", "GFLOP/s")
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines)


def bench_linears(kernels, table, shape_name, s, naive: bool):
    h, i, hd = s["hidden"], s["inter"], s["head_dim"]
    layers = {"q/o_proj": (s["heads"] * hd, h), "k/v_proj": (s["kv_heads"] * hd, h),
              "gate/up_proj": (i, h), "down_proj": (h, i)}
    for label, (n, k) in layers.items():
        copies = min(MAX_COPIES, max(1, -(-POOL_BYTES // (n * k * 2))))
        pool16 = [torch.randn(n, k).bfloat16() for _ in range(copies)]
        pool32 = [w.float() for w in pool16[: max(1, copies // 2)]]
        for m in (1, 16, 64):
            if m > 1 and label not in ("q/o_proj", "gate/up_proj"):
                continue
            x, x16 = torch.randn(m, k), torch.randn(m, k).bfloat16()
            name = f"linear {label} {n}x{k} M={m}"
            flops = 2 * m * n * k
            iters = len(pool16) if m == 1 else max(2, len(pool16) // 2)
            rows = [("tvm bf16 w", lambda w: kernels.linear(x, w), pool16, 2),
                    ("torch bf16 (bf16 x)", lambda w: torch.nn.functional.linear(x16, w), pool16, 2),
                    ("tvm fp32 w", lambda w: kernels.linear(x, w), pool32, 4),
                    ("torch fp32", lambda w: torch.nn.functional.linear(x, w), pool32, 4)]
            if naive and m == 1 and label == "gate/up_proj":
                rows.insert(1, ("tvm bf16 w, naive schedule", lambda w: kernels.linear(x, w, schedule="naive"),
                                pool16, 2))
            for impl, fn, pool, size in rows:
                med, best = timed(cycling(fn, pool), iters if pool is pool16 else len(pool))
                table.add(shape_name, name, impl, med, best, nbytes=n * k * size, flops=flops)


def bench_others(kernels, table, shape_name, s):
    h, i, H, KH, D = s["hidden"], s["inter"], s["heads"], s["kv_heads"], s["head_dim"]
    w_norm = (1 + 0.1 * torch.randn(h)).float()
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, D, 2).float() / D))
    for m in (1, 64):
        x = torch.randn(m, h)
        rows = [("rms_norm", lambda: kernels.rms_norm(x, w_norm, 1e-5), lambda: ref.rms_norm_reference(x, w_norm, 1e-5))]
        g, u = torch.randn(m, i), torch.randn(m, i)
        rows.append(("silu_mul", lambda: kernels.silu_mul(g, u), lambda: ref.silu_mul_reference(g, u)))
        q, k = torch.randn(m, H, D), torch.randn(m, KH, D)
        pos = torch.arange(1000, 1000 + m)
        rows.append(("rotary q+k", lambda: kernels.rotary(q, k, pos, inv_freq),
                     lambda: ref.rotary_reference(q, k, pos, inv_freq)))
        for name, tvm_fn, torch_fn in rows:
            iters = 200 if m == 1 else 20
            table.add(shape_name, f"{name} M={m}", "tvm", *timed(tvm_fn, iters))
            table.add(shape_name, f"{name} M={m}", "torch (HF-order eager ops)", *timed(torch_fn, iters))
    ctx, max_seq = 1024, 2048
    k_cache, v_cache = torch.randn(1, KH, max_seq, D), torch.randn(1, KH, max_seq, D)
    lens = torch.tensor([ctx], dtype=torch.int32)
    for n_new, tree in ((1, False), (16, False), (64, True)):
        q = torch.randn(1, n_new, H, D)
        mask = torch.ones(1, n_new, n_new, dtype=torch.bool).tril() if tree else None
        allowed = torch.ones(n_new, ctx + n_new, dtype=torch.bool)
        allowed[:, ctx:] = torch.ones(n_new, n_new, dtype=torch.bool).tril()

        def sdpa():
            return torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k_cache[:, :, : ctx + n_new], v_cache[:, :, : ctx + n_new],
                attn_mask=allowed, enable_gqa=True)

        nbytes = 2 * KH * (ctx + n_new) * D * 4
        flops = 4 * H * n_new * (ctx + n_new) * D
        name = f"attention ctx={ctx} T={n_new}{' tree mask' if tree else ''}"
        iters = 20 if n_new == 1 else 3
        table.add(shape_name, name, "tvm", *timed(lambda: kernels.attention(q, k_cache, v_cache, lens, mask), iters),
                  nbytes=nbytes, flops=flops)
        table.add(shape_name, name, "torch sdpa (gqa, bool mask)", *timed(sdpa, iters), nbytes=nbytes, flops=flops)


def sweep(kernels, table):
    """Register tiles of the bf16 linear at the 1B gate shape (8192 x 2048)."""
    n, k = 8192, 2048
    pool = [torch.randn(n, k).bfloat16() for _ in range(3)]
    for m, tiles in ((1, [(1, 8, 8), (1, 4, 8), (1, 4, 16), (1, 2, 16), (1, 8, 16), (1, 16, 8)]),
                     (16, [(2, 4, 8), (4, 2, 8), (2, 2, 16), (4, 3, 8), (1, 8, 8)])):
        x = torch.randn(m, k)
        for tile in tiles:
            t = LinearTile(*tile)
            med, best = timed(cycling(lambda w: linear(kernels.cache, x, w, tile=t), pool), 3)
            table.add("sweep", f"linear {n}x{k} M={m}", f"tile mr,nr,vl={tile}", med, best,
                      nbytes=n * k * 2, flops=2 * m * n * k)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=["1b", "small", "all"], default="all")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    parser.add_argument("--cache", type=Path, default=None, help="kernel cache folder (default: SPECIR_TVM_CACHE or ~/.cache/specir/tvm)")
    parser.add_argument("--sweep", action="store_true", help="time linear register tiles instead")
    args = parser.parse_args(argv)

    kernels = CPUKernels(args.cache)
    host = kernels.cache.host
    load0 = os.getloadavg()
    bw = bandwidths()
    table = Table(bw)
    if args.sweep:
        sweep(kernels, table)
    else:
        for name in (["1b", "small"] if args.shape == "all" else [args.shape]):
            bench_linears(kernels, table, name, SHAPES[name], naive=True)
            bench_others(kernels, table, name, SHAPES[name])
    load1 = os.getloadavg()
    report = "\n".join([
        "# TVM CPU kernels vs torch",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- command: `python bench/cpu_kernels.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
        f"- cpu: {platform.processor() or platform.machine()} ({host.mcpu}, {host.cores} cores, features "
        f"{', '.join(host.features)}); torch {torch.__version__} with {torch.get_num_threads()} threads",
        f"- load average at start / end: {load0[0]:.1f} / {load1[0]:.1f} (the machine is shared; see `best`)",
        f"- measured bandwidth: copy {bw['copy'] / 1e9:.1f} GB/s (read + write bytes), "
        f"read {bw['read'] / 1e9:.1f} GB/s (fp32 sum)",
        "- GB/s: weight bytes (linear) or K+V bytes (attention) per median call; % of copy BW uses the copy figure",
        "",
        table.markdown(),
        "",
    ])
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)


if __name__ == "__main__":
    main()
