"""cuBLAS linear time by row count: does a verify of M rows pay for rows past a tile (65 = 64 + the root)?

    python bench/gemm_rows.py --out OUT/gemm_rows.json [--rows 1,5,16,32,64,65,72,80,96,128]

For each weight shape of the Qwen3.5-9B-like hybrid (bench/hybrid_bench.py's target: the gated
delta and attention projections, the MLP's grouped gate/up and its down projection, the 248k-row
lm head) and of Llama-3.1-8B, times `torch.nn.functional.linear` (bf16, the cuBLAS route of
backends/triton/gemm_route.py) at each row count, as CUDA-graph replays (20 linears a graph, median
of 5), and the same call on rows padded to the next multiple of 16 / 32 / 64 (the input copied into a
preallocated zero-padded buffer inside the graph, as a padding route would do). Prints, per shape,
us a linear at each M and the padded variants for the M that are not multiples of 16; writes JSON.
"""
from __future__ import annotations

import argparse
import json

import _checkout  # noqa: F401  (a plain checkout runs too)
import torch
from gemv import time_calls

SHAPES = {
    "q35-9b": {"delta qkv": (8192, 4096), "delta z / out / attn o": (4096, 4096), "attn q+gate": (8192, 4096),
               "attn k/v": (1024, 4096), "mlp gate+up": (24576, 4096), "mlp down": (4096, 12288),
               "lm head": (248320, 4096)},
    "llama-8b": {"qkv": (6144, 4096), "o": (4096, 4096), "gate+up": (28672, 4096), "down": (4096, 14336),
                 "lm head": (128256, 4096)},
}


def time_graph(fn, reps: int = 20, rounds: int = 5) -> float:
    """Median microseconds of one fn() call over `rounds` replays of a graph of `reps` calls (gemv.time_calls)."""
    return time_calls([fn] * reps, rounds) * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", default="1,5,16,32,64,65,72,80,96,128")
    ap.add_argument("--models", default="q35-9b,llama-8b")
    args = ap.parse_args(argv)
    rows = [int(r) for r in args.rows.split(",")]
    dev = torch.device("cuda")
    result = {"gpu": torch.cuda.get_device_name(), "rows": rows, "shapes": []}
    lines = []
    for model in args.models.split(","):
        for name, (n, k) in SHAPES[model].items():
            w = torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02
            entry = {"model": model, "name": name, "n": n, "k": k, "us": {}, "padded_us": {}}
            for m in rows:
                x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                entry["us"][m] = round(time_graph(lambda: torch.nn.functional.linear(x, w)), 2)
                if m % 16:
                    for tile in (16, 32, 64):
                        mp = -(-m // tile) * tile
                        buf = torch.zeros(mp, k, device=dev, dtype=torch.bfloat16)

                        def padded():
                            buf[:m].copy_(x)
                            return torch.nn.functional.linear(buf, w)[:m]
                        entry["padded_us"][f"{m}->{mp}"] = round(time_graph(padded), 2)
                del x
            del w
            torch.cuda.empty_cache()
            result["shapes"].append(entry)
            lines.append(f"{model:9} {name:24} " + " ".join(f"{m}:{entry['us'][m]}" for m in rows)
                         + "  pad " + " ".join(f"{key}:{v}" for key, v in entry["padded_us"].items()
                                               if key.startswith("65")))
            print(lines[-1], flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{result['gpu']}: us a linear (CUDA-graph replays)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
