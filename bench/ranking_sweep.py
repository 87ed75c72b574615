"""Time the ranking kernels' pass-1 slicing (chunk x num_warps) at a drafter's shapes; print the best.

    python bench/ranking_sweep.py --out OUT/ranking_sweep.json

Why: on an H100 (bench/results/gpu-2026-12-07-session28) each level of a depth-10 tree ranked its 8 rows x 32768
draft ids in 9.3 us (`_chunk_kernel`) + 4.2 us (`_merge_kernel`): 135 us a step for under 1 MB of logits.
Pass 1 picks K winners a slice by K rounds of two reductions; narrower slices on fewer warps shorten each round.

Cases: (rows, vocab, k) of a tree level (8 x 32768, k 8), its root (1 x 32768), the full vocabulary (8 x 128256)
and a chain's k = 1. For each: chunk in 256..8192 and 1-8 warps, a CUDA graph of 64 rankings (gemv.time_calls),
every output checked equal to the rule's (ids exactly, log-probabilities within 1e-5). Writes JSON; prints a
table last (rule's time, best, its chunk and warps). The rule lives in kernels/ranking.py (`chunking`).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _checkout  # noqa: F401  (a plain checkout runs too)
import torch

CASES = {"tree level 8x32768 k8": (8, 32768, 8), "tree root 1x32768 k8": (1, 32768, 8),
         "full vocab 8x128256 k8": (8, 128256, 8), "chain 1x32768 k1": (1, 32768, 1)}
CHUNKS = (256, 512, 1024, 2048, 4096, 8192)
WARPS = (1, 2, 4, 8)


def sweep_case(rows: int, vocab: int, k: int, timer, device) -> dict:
    """Every (chunk, warps) the kernels accept for this case, checked against the rule's output and timed."""
    from specir.backends.triton.kernels import ranking

    logits = torch.randn(rows, vocab, device=device).to(torch.bfloat16)
    want_vals, want_ids = ranking._run(logits, k, None)
    _, rule_chunk = ranking.chunking(rows, vocab, k, device)
    out = {"rule": {"chunk": rule_chunk, "num_warps": ranking.chunk_warps(rule_chunk),
                    "us": timer(lambda: ranking._run(logits, k, None)) * 1e6}, "candidates": []}
    for chunk in CHUNKS:
        if chunk > vocab * 2 or ranking.triton.cdiv(vocab, chunk) * k > ranking.MAX_CANDIDATES:
            continue
        for warps in WARPS:
            vals, ids = ranking._run(logits, k, None, chunk=chunk, num_warps=warps)
            same = bool(torch.equal(ids, want_ids)) and bool(torch.allclose(vals, want_vals, atol=1e-5, rtol=0))
            t = timer(lambda c=chunk, w=warps: ranking._run(logits, k, None, chunk=c, num_warps=w))
            out["candidates"].append({"chunk": chunk, "num_warps": warps, "us": t * 1e6, "same": same})
    return out


def graph_timer(fn) -> float:
    from gemv import time_calls

    return time_calls([fn] * 64)


def run(cases: dict, timer, device) -> dict:
    results = {}
    for name, (rows, vocab, k) in cases.items():
        results[name] = sweep_case(rows, vocab, k, timer, device)
        best = min(results[name]["candidates"], key=lambda c: c["us"])
        print(f"  {name}: rule {results[name]['rule']['us']:.1f} us, best {best['us']:.1f} us "
              f"(chunk {best['chunk']}, {best['num_warps']} warps)", flush=True)
    return results


def table(results: dict) -> str:
    lines = ["| case | rule chunk/warps | rule us | best chunk/warps | best us | all outputs equal |", "|---|---|---:|---|---:|---|"]
    for name, r in results.items():
        best = min(r["candidates"], key=lambda c: c["us"])
        lines.append(f"| {name} | {r['rule']['chunk']}/{r['rule']['num_warps']} | {r['rule']['us']:.1f} | "
                     f"{best['chunk']}/{best['num_warps']} | {best['us']:.1f} | "
                     f"{'yes' if all(c['same'] for c in r['candidates']) else 'NO'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output .json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/ranking_sweep.py needs a CUDA GPU (tests/triton/test_ranking_sweep.py runs it on the CPU)",
              file=sys.stderr)
        return 2
    start = time.time()
    results = run(CASES, graph_timer, torch.device("cuda"))
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device": torch.cuda.get_device_name(), "cases": results,
                                "seconds": time.time() - start}, indent=1))
    print(table(results))
    return 0 if all(c["same"] for r in results.values() for c in r["candidates"]) else 1


if __name__ == "__main__":
    sys.exit(main())
