"""Sweep the skinny GEMM's launch parameters at a tree verify's row count (BF12 first, bf16 bits checked).

    python bench/gemm_tune.py --out OUT/gemm_tune.json [--rows 65] [--budget-s 300]
    python bench/gemm_tune.py --apply OUT/gemm_tune.json [--min-gain 0.03]

`--apply` writes the measured tilings that beat the rule by more than --min-gain (with equal bits) into
linear_config.GEMM_TILES, keyed by the rule's row band, and prints the entries; commit the file with the JSON.

Why: a BF12 pipeline keeps every linear on Triton (bit-identity with the bf16 kernel, gemm_route.py), so its
65-row tree verify runs Triton's skinny GEMM where a bf16 pipeline runs cuBLAS; session 25 measured that step
4x slower (H100: 23.5 ms in the GEMM against 6.8 ms for the whole bf16 verify). The table in
backends/triton/kernels/linear_config.py picks block_m = 128 for 65 rows (63 rows of padding) and block_n = 64.

For each Llama-3.1-8B linear (the grouped qkv and gate+up, o, down) and row count:
- stage 1: block_m x block_n x num_warps (the table's split for that tiling), BF12;
- stage 2: the two best, with num_stages 3/4, groups 2, split x2 and /2, x w^T (swap_ab off), and
  weight blocks first where stage 1 launched row tiles first;
- the best and the table's choice timed for bf16 too, with the output bits of BF12 == bf16 checked
  (the configuration is chosen from (M, N, K) alone, so both formats must run it), and cuBLAS for scale.
Timing: CUDA graphs over enough weight copies that L2 never serves them (bench/gemv.py's method).
Every field swept but num_stages and m_fastest is part of the GEMM's order key, so a new table entry changes bits against the old
table but never between the formats. Writes JSON; prints a table last.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import _checkout  # noqa: F401  (a plain checkout runs too)
import torch
from gemv import copy_bandwidth, make_weights, time_calls
from tile_table import write_table

SHAPES = {"gate+up 28672x4096": (28672, 4096), "down 4096x14336": (4096, 14336),  # most of a verify's bytes first
          "qkv 6144x4096": (6144, 4096), "o 4096x4096": (4096, 4096)}


def stage_one(m, n, k):
    """block_m x block_n x num_warps, split from the table's rule for that tiling; several row tiles launch
    a weight block's row tiles together (m_fastest)."""
    from specir.backends.triton.kernels.linear_config import LinearConfig, _split_for

    iters = -(-k // 128)
    out = []
    for bm in (16, 32, 64, 128):
        for bn in (64, 128, 256):
            for warps in (4, 8):
                split = _split_for(-(-n // bn) * -(-m // bm), iters)
                out.append(LinearConfig("gemm", bn, 1, split, bm, warps, num_stages=2, swap_ab=True,
                                        m_fastest=m > bm))
    return out


def stage_two(cfg, k):
    iters = -(-k // 128)
    out = [replace(cfg, num_stages=3), replace(cfg, num_stages=4), replace(cfg, swap_ab=False)]
    if cfg.m_fastest:
        out.append(replace(cfg, m_fastest=False))
    if iters % 2 == 0:
        out.append(replace(cfg, groups=2))
    out += [replace(cfg, split=s) for s in (cfg.split * 2, cfg.split // 2) if 1 <= s <= 16 and iters >= 2 * s]
    return out


def table_entries(entries, min_gain: float) -> dict:
    """{(row band, N, K): fields} for each measured entry whose best tiling beats the rule's by min_gain, bits equal."""
    from specir.backends.triton.kernels.linear_config import GEMM_FIELDS, gemm_row_band

    out = {}
    for e in entries:
        if e["bits_equal"] and e["bf12_best_us"] < (1 - min_gain) * e["bf12_table_us"]:
            out[(gemm_row_band(e["M"]), e["N"], e["K"])] = {f: e["best"][f] for f in sorted(GEMM_FIELDS)}
    return out


def apply(path: Path, min_gain: float, source: Path | None = None) -> int:
    """Rewrite GEMM_TILES in `source` (linear_config.py) with the entries of a gemm_tune JSON (others kept)."""
    from specir.backends.triton.kernels import linear_config

    entries = json.loads(path.read_text())["entries"]
    bands = [(linear_config.gemm_row_band(e["M"]), e["N"], e["K"]) for e in entries]
    if len(set(bands)) < len(bands):
        print(f"{path}: two row counts of one row band (gemm_row_band) for one matrix; tune one per band",
              file=sys.stderr)
        return 1
    found = table_entries(entries, min_gain)
    source = source or Path(linear_config.__file__)
    if not found:
        print(f"no tiling beat the rule by more than {min_gain:.0%}; {source} unchanged")
        return 0
    return write_table(source, "GEMM_TILES", "tuple[int, int, int]", "GEMM_FIELDS", linear_config.GEMM_TILES, found)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="a .json file")
    ap.add_argument("--apply", type=Path, help="write a measured JSON's winners into linear_config.GEMM_TILES")
    ap.add_argument("--min-gain", type=float, default=0.03)
    ap.add_argument("--rows", default="65", help="row counts, comma-separated")
    ap.add_argument("--shapes", default=",".join(s.split()[0] for s in SHAPES), help="gate+up,down,qkv,o")
    ap.add_argument("--budget-s", type=float, default=300.0, help="stop sweeping after this long (best so far kept)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.apply:
        return apply(args.apply, args.min_gain)
    if not args.out:
        ap.error("--out or --apply")
    if not torch.cuda.is_available():
        print("bench/gemm_tune.py needs a CUDA GPU", file=sys.stderr)
        return 2
    from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
    from specir.backends.triton.kernels.linear_config import choose

    start = time.time()
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    copy_gbps = copy_bandwidth()
    print(f"copy bandwidth {copy_gbps:.0f} GB/s on {torch.cuda.get_device_name()}", flush=True)
    wanted = set(args.shapes.split(","))
    result = dict(device=torch.cuda.get_device_name(), copy_gbps=copy_gbps, entries=[], tried=[])
    for name, (n, k) in SHAPES.items():
        if name.split()[0] not in wanted:
            continue
        ws, ps = make_weights(n, k, args.seed)
        for m in (int(r) for r in args.rows.split(",")):
            if time.time() - start > args.budget_s:
                print(f"  {name} M={m}: not swept (--budget-s spent)", flush=True)
                continue
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)

            def timed(fn, weights, cfg=None, replays=6):
                kw = {} if cfg is None else {"config": cfg}
                return time_calls([(lambda w=w: fn(x, w, **kw)) for w in weights] * 2, replays=replays) * 1e6

            table = choose(m, n, k)
            scores = {}

            def attempt(cfg):
                if cfg in scores or time.time() - start > args.budget_s:
                    return
                try:
                    scores[cfg] = timed(linear_bf12, ps, cfg)
                except Exception as exc:  # a tiling that does not compile or fit
                    print(f"    skip {cfg}: {type(exc).__name__}: {str(exc)[:80]}", flush=True)
                    scores[cfg] = float("inf")
                result["tried"].append(dict(shape=name, M=m, config=asdict(cfg), bf12_us=scores[cfg]))

            attempt(table)
            for cfg in stage_one(m, n, k):
                attempt(cfg)
            for cfg in sorted(scores, key=scores.get)[:2]:
                for variant in stage_two(cfg, k):
                    attempt(variant)
            best = min(scores, key=scores.get)
            y16, y12 = linear_bf16(x, ws[0], config=best), linear_bf12(x, ps[0], config=best)
            entry = dict(shape=name, N=n, K=k, M=m, table=asdict(table), best=asdict(best),
                         bf12_table_us=scores[table], bf12_best_us=scores[best],
                         bf16_table_us=timed(linear_bf16, ws, table), bf16_best_us=timed(linear_bf16, ws, best),
                         cublas_us=timed(torch.nn.functional.linear, ws),
                         bits_equal=bool(torch.equal(y16.view(torch.int16), y12.view(torch.int16))),
                         tried=len([c for c in scores if scores[c] < float("inf")]))
            result["entries"].append(entry)
            print(f"  {name} M={m}: BF12 table {entry['bf12_table_us']:.1f} us -> best {entry['bf12_best_us']:.1f} "
                  f"(bm {best.block_m} bn {best.block_n} w {best.num_warps} st {best.num_stages} g {best.groups} "
                  f"split {best.split} swap {best.swap_ab} m_fastest {best.m_fastest}); bf16 {entry['bf16_table_us']:.1f} -> "
                  f"{entry['bf16_best_us']:.1f}; cuBLAS {entry['cublas_us']:.1f}; bits equal {entry['bits_equal']}; "
                  f"{entry['tried']} tried, {time.time() - start:.0f}s", flush=True)
            path.write_text(json.dumps(result, indent=1))
        del ws, ps
        torch.cuda.empty_cache()
    print(f"wrote {path} in {time.time() - start:.0f}s")
    print("| shape | M | BF12 table us | BF12 best us | bf16 table | bf16 best | cuBLAS | best (bm, bn, warps, stages, "
          "groups, split, swap, m_fastest) | bits |")
    print("|---|---|---|---|---|---|---|---|---|")
    for e in result["entries"]:
        b = e["best"]
        print(f"| {e['shape']} | {e['M']} | {e['bf12_table_us']:.1f} | {e['bf12_best_us']:.1f} | {e['bf16_table_us']:.1f} "
              f"| {e['bf16_best_us']:.1f} | {e['cublas_us']:.1f} | {b['block_m']}, {b['block_n']}, {b['num_warps']}, "
              f"{b['num_stages']}, {b['groups']}, {b['split']}, {b['swap_ab']}, {b['m_fastest']} | {'yes' if e['bits_equal'] else 'NO'} |")
    return 0 if all(e["bits_equal"] for e in result["entries"]) else 1


if __name__ == "__main__":
    sys.exit(main())
