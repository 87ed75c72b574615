"""The RMSNorm prologue in Triton's GEMM against the norm as a launch of its own, by row count.

    python bench/norm_prologue_rows.py --out OUT/norm_prologue_rows.json [--rows 2,4,8]

backends/triton/fused_parts.py folds norm_linear's norm into one-row forwards only: on an H100 (session
25) the GEMM's prologue cost about 17 us a launch, and its unrolled sum of squares took the GEMM to 255
registers (90-96 rolled, a9f21cf). This times, for the drafter's and the 8B target's matrices at each row
count (CUDA-graph replays of 20 launches, median), `linear_bf16(h, w, norm=...)` ("folded") against
`rms_norm` then `linear_bf16` ("apart", the norm in its fast order; as fused_parts runs it), and checks
the folded bits against the apart launches with the norm in the prologue's fixed order. Prints a table,
writes JSON. If folded wins at every row count, NORM_LINEAR_MAX_ROWS can rise.
`--device cpu` under TRITON_INTERPRET=1 runs it at a tiny shape without timing (the smoke test).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _checkout  # noqa: F401  (a plain checkout runs too)
import torch

SHAPES = {"drafter qkv 3072x2048": (3072, 2048), "drafter gate/up 16384x2048": (16384, 2048),
          "drafter head 32768x2048": (32768, 2048), "8B qkv 6144x4096": (6144, 4096),
          "8B gate/up 28672x4096": (28672, 4096)}
TINY = {"tiny 96x256": (96, 256)}
COPIES = 20  # distinct weights a graph, so that L2 does not serve them


def run(rows: list[int], shapes: dict, device: str, timed: bool) -> list[dict]:
    from specir.backends.triton.kernels.linear import linear_bf16
    from specir.backends.triton.kernels.linear_config import choose
    from specir.backends.triton.kernels.norm import rms_norm
    out = []
    g = torch.Generator(device=device).manual_seed(0)
    for name, (n, k) in shapes.items():
        copies = COPIES if timed else 1
        ws = [(torch.randn(n, k, generator=g, device=device) * 0.02).to(torch.bfloat16) for _ in range(copies)]
        gain = (1 + 0.1 * torch.randn(k, generator=g, device=device)).to(torch.bfloat16)
        for m in rows:
            h = torch.randn(m, k, generator=g, device=device).to(torch.bfloat16)
            xn, y = torch.empty_like(h), torch.empty(m, n, dtype=torch.bfloat16, device=device)
            cfg = choose(m, n, k)
            folded = [lambda w=w: linear_bf16(h, w, norm=(gain, 1e-5), out=y, config=cfg) for w in ws]
            apart = [f for w in ws for f in (lambda: rms_norm(h, gain, 1e-5, out=xn),
                                             lambda w=w: linear_bf16(xn, w, out=y, config=cfg))]
            want = linear_bf16(rms_norm(h, gain, 1e-5, fixed_order=True), ws[0], config=cfg)
            same = torch.equal(linear_bf16(h, ws[0], norm=(gain, 1e-5), config=cfg).view(torch.int16),
                               want.view(torch.int16))
            row = {"shape": name, "m": m, "n": n, "k": k, "bits_equal": same}
            if timed:
                from gemv import time_calls
                row["folded_us"] = time_calls(folded) * 1e6
                row["apart_us"] = time_calls(apart) * 2 * 1e6  # two launches a linear
            out.append(row)
            print(json.dumps(row), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", default="2,4,8")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    timed = a.device == "cuda"
    if timed and not torch.cuda.is_available():
        print("norm_prologue_rows: no GPU here (--device cpu with TRITON_INTERPRET=1 for a smoke run)", file=sys.stderr)
        return 2
    rows = run([int(v) for v in a.rows.split(",")], SHAPES if timed else TINY, a.device, timed)
    path = Path(a.out)
    path = path if path.suffix == ".json" else path / "norm_prologue_rows.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if timed else "cpu"
    path.write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    print(f"\n{device}\n| shape | M | folded us | apart us | folded / apart | bits |\n|---|---:|---:|---:|---:|---|")
    for r in rows:
        f, s = r.get("folded_us"), r.get("apart_us")
        ratio = f"{f / s:.2f}" if f and s else "-"
        print(f"| {r['shape']} | {r['m']} | {f or 0:.1f} | {s or 0:.1f} | {ratio} | {r['bits_equal']} |")
    return 0 if all(r["bits_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
