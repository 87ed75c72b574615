"""BF12 GEMV variants at M = 1 (Llama-3.1-8B shapes): time each, check its bits against bf16.

    python bench/gemv_variants.py --out OUT [--budget 95]
    TRITON_INTERPRET=1 python bench/gemv_variants.py --out OUT --cpu-smoke   # code paths, tiny shape

Variants are order-neutral GEMV launch configurations (`LinearConfig` fields that do not change
the arithmetic: raw rows fused or not, x carried or loaded late, prefetch depth, register cap,
block_n), applied on top of `linear_config.choose(1, N, K, "bf12")`; see docs/BF12.md
"Performance notes" for what each is meant to fix. Every variant's output must equal the bf16
kernel's bit for bit. Timing as bench/gemv.py: weight copies rotated so that L2 never serves
them, a CUDA graph of back-to-back calls replayed, median per call; % of copy bandwidth counts
each format's own bytes. Variants are run in priority order and the rest skipped once `--budget`
seconds have passed (compiles dominate). Writes OUT/gemv_variants.json, prints a table last.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

SHAPES = {
    "q/o 4096x4096": (4096, 4096),
    "k/v 1024x4096": (1024, 4096),
    "gate/up 14336x4096": (14336, 4096),
    "down 4096x14336": (4096, 14336),
    "lm_head 128256x4096": (128256, 4096),
}

# name -> (format, fields replacing the table's choice); priority order.
# "table" is what linear_config.choose gives now; v2-0 is the configuration measured on 2026-11-30.
VARIANTS = {
    "bf16": ("bf16", {}),
    "bf12-table": ("bf12", {}),
    "bf12-v2-0": ("bf12", dict(fuse_raw=False, x_late=False)),
    "bf12-fused": ("bf12", dict(fuse_raw=True, x_late=False)),
    "bf12-fused-xlate": ("bf12", dict(fuse_raw=True, x_late=True)),
    "bf12-depth2-xlate": ("bf12", dict(fuse_raw=True, x_late=True, depth=2)),
    "bf12-depth2-xlate-r128": ("bf12", dict(fuse_raw=True, x_late=True, depth=2, maxnreg=128)),
    "bf12-bn32-depth2-xlate": ("bf12", dict(fuse_raw=True, x_late=True, depth=2, block_n=32)),
    "bf16-depth2-xlate": ("bf16", dict(x_late=True, depth=2)),
}


def configs(n, k):
    """(name, fmt, LinearConfig) per variant for [n, k], duplicates of an earlier one dropped."""
    from specir.backends.triton.kernels.linear_config import choose

    out, seen = [], {}
    for name, (fmt, fields) in VARIANTS.items():
        cfg = replace(choose(1, n, k, fmt), **fields)
        key = (fmt, cfg)
        if key in seen:
            out.append((name, fmt, cfg, seen[key]))
            continue
        seen[key] = name
        out.append((name, fmt, cfg, None))
    return out


def run_shape(name, n, k, copy_gbps, seed, rows, deadline, *, cpu=False):
    from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
    from specir.bf12 import pack

    if cpu:
        g = torch.Generator().manual_seed(seed)
        w = (torch.randn(n, k, generator=g) * 0.02).to(torch.bfloat16)
        w[3, 1], w[3, 2] = 1e-30, 1e-36  # one raw row
        ws, ps = [w], [pack(w)]
    else:
        from gemv import make_weights
        ws, ps = make_weights(n, k, seed)
    dev = ws[0].device
    x = torch.randn(1, k, generator=torch.Generator().manual_seed(seed + 1)).to(torch.bfloat16).to(dev)
    y_ref = linear_bf16(x, ws[0])
    bytes_of = {"bf16": n * k * 2, "bf12": ps[0].nbytes()}
    io = (k + n) * 2
    results = {}
    for vname, fmt, cfg, same_as in configs(n, k):
        row = dict(shape=name, N=n, K=k, variant=vname, fmt=fmt, config=asdict(cfg),
                   raw_rows=ps[0].raw_row_count, weight_bytes=bytes_of[fmt])
        if same_as is not None:  # measured (or skipped, or failed) under its first name
            rows.append({**results[same_as], **row, "same_as": same_as})
            continue
        if time.time() > deadline:
            results[vname] = {**row, "skipped": "time budget"}
            rows.append(results[vname])
            continue
        fn, weights = (linear_bf16, ws) if fmt == "bf16" else (linear_bf12, ps)
        try:
            y = fn(x, weights[0], config=cfg)
            equal = bool(torch.equal(y.view(torch.int16), y_ref.view(torch.int16)))
            if cpu:
                us = None
            else:
                from gemv import time_calls
                t = time_calls([(lambda w=w: fn(x, w, config=cfg)) for w in weights] * 2, replays=10)
                us = t * 1e6
        except Exception as exc:  # a variant that does not compile or fit: record, go on
            results[vname] = {**row, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            rows.append(results[vname])
            print(f"  {name} {vname}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            continue
        row.update(bits_equal_bf16=equal, us=us)
        if us is not None:
            gbps = (bytes_of[fmt] + io) / (us * 1e-6) / 1e9
            row.update(gbps=gbps, pct_copy=100 * gbps / copy_gbps)
        results[vname] = row
        rows.append(row)
        print(f"  {name} {vname}: " + (f"{us:.1f} us {row['pct_copy']:.0f}% of copy" if us else "ran")
              + f", bits equal bf16: {equal}", flush=True)
    del ws, ps
    if not cpu:
        torch.cuda.empty_cache()


def table(rows, copy_gbps) -> str:
    names = list(VARIANTS)
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    by = {(r["shape"], r["variant"]): r for r in rows}
    lines = [f"M = 1, us (% of copy bw {copy_gbps:.0f} GB/s in the format's own bytes); speedup = bf16 us / us; "
             "* = bits differ from bf16", "",
             "| variant | " + " | ".join(shapes) + " | sum us | vs bf16 |", "|---" * (len(shapes) + 3) + "|"]
    base = sum(by.get((s, "bf16"), {}).get("us") or 0 for s in shapes)
    for v in names:
        cells, total, ok = [], 0.0, True
        for s in shapes:
            r = by.get((s, v), {})
            if r.get("us") is None:
                cells.append(r.get("skipped") or ("error" if "error" in r else "-"))
                ok = False
                continue
            total += r["us"]
            cells.append(f"{r['us']:.1f} ({r['pct_copy']:.0f}%){'' if r['bits_equal_bf16'] else ' *'}")
        lines.append(f"| {v} | " + " | ".join(cells) + f" | {total:.1f} | "
                     + (f"{base / total:.2f}x" if ok and total else "") + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder (writes gemv_variants.json) or .json file")
    ap.add_argument("--budget", type=float, default=95.0, help="seconds after which variants are skipped")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-smoke", action="store_true", help="interpreter run at a tiny shape, no timing")
    args = ap.parse_args(argv)
    start = time.time()
    deadline = start + args.budget
    out = Path(args.out)
    path = out if out.suffix == ".json" else out / "gemv_variants.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    if args.cpu_smoke:
        copy_gbps, device = 0.0, "cpu (interpreter)"
        run_shape("tiny 40x1100", 40, 1100, 1.0, args.seed, rows, deadline, cpu=True)
    else:
        if not torch.cuda.is_available():
            print("bench/gemv_variants.py needs a CUDA GPU (or --cpu-smoke under TRITON_INTERPRET=1)", file=sys.stderr)
            return 2
        from gemv import copy_bandwidth
        copy_gbps, device = copy_bandwidth(), torch.cuda.get_device_name()
        print(f"copy bandwidth {copy_gbps:.0f} GB/s on {device}", flush=True)
        for name, (n, k) in SHAPES.items():
            run_shape(name, n, k, copy_gbps, args.seed, rows, deadline)
    all_equal = all(r.get("bits_equal_bf16", True) for r in rows)
    result = dict(device=device, torch=torch.__version__, triton=__import__("triton").__version__,
                  copy_gbps=copy_gbps, variants={k: dict(fmt=v[0], fields=v[1]) for k, v in VARIANTS.items()},
                  rows=rows, all_bits_equal=all_equal, seconds=time.time() - start)
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path} in {time.time() - start:.0f}s; all bits equal: {all_equal}")
    if not args.cpu_smoke:
        print(table(rows, copy_gbps))
    else:
        for r in rows:
            print(f"  {r['variant']}: " + ("same as " + r["same_as"] if "same_as" in r else
                                           f"bits equal {r.get('bits_equal_bf16')} {r.get('error', '')}"))
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
