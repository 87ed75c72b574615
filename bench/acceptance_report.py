"""Acceptance report for the shipped zoo pair: mean accepted length (tau) per workload for chain
(k = 4), tree (budget 32 and 64) and n-gram drafting, each measured with `specir bench`.

    python bench/acceptance_report.py [--limit 8] [--max-new-tokens 64] [--out bench/results/acceptance]
                                      [--target-model DIR] [--pipelines chain-k4,tree-b64]

--target-model: another target for the shipped drafter (e.g. the zoo's hybrid,
specir/zoo/models/code-hybrid-target).

Writes one bench folder per pipeline and a markdown summary (acceptance.md) beside them.
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

PIPELINES = {
    "chain-k4": ["--draft", "chain", "--k", "4"],
    "tree-b32": ["--draft", "tree", "--k", "6", "--budget", "32", "--topk", "4"],
    "tree-b64": ["--draft", "tree", "--k", "8", "--budget", "64", "--topk", "6"],
    "tree-d6k8-b64": ["--draft", "tree", "--k", "6", "--budget", "64", "--topk", "8"],
    "tree-d8k6-b63": ["--draft", "tree", "--k", "8", "--budget", "63", "--topk", "6"],  # bench/hybrid_bench.py's tree
    # deeper trees of the same 64 nodes (and 96 at depth 14): what tau depth buys at the GPU sweep's budget
    "tree-d8k8-b64": ["--draft", "tree", "--k", "8", "--budget", "64", "--topk", "8"],
    "tree-d10k4-b64": ["--draft", "tree", "--k", "10", "--budget", "64", "--topk", "4"],
    "tree-d10k8-b64": ["--draft", "tree", "--k", "10", "--budget", "64", "--topk", "8"],
    "tree-d12k8-b64": ["--draft", "tree", "--k", "12", "--budget", "64", "--topk", "8"],
    "tree-d14k8-b96": ["--draft", "tree", "--k", "14", "--budget", "96", "--topk", "8"],
    "ngram-k4": ["--drafter", "ngram", "--k", "4"],
}


def specir(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "specir.cli.main", *args], check=True, capture_output=True,
                          text=True).stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--out", default="bench/results/acceptance")
    ap.add_argument("--target-model", default="", help="target checkpoint (default: the shipped zoo target)")
    ap.add_argument("--drafter", default="", help="drafter checkpoint (default: the shipped zoo drafter, also with --target-model)")
    ap.add_argument("--pipelines", default=",".join(PIPELINES))
    args = ap.parse_args()
    from specir.zoo.paths import zoo_model_dir
    target = ["--target-model", args.target_model] if args.target_model else []
    # with another target, init's default drafter is n-gram lookup: name the shipped drafter
    drafter = ["--drafter", args.drafter or str(zoo_model_dir("code-drafter"))] if args.drafter or target else []
    models = target + drafter
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for name in args.pipelines.split(","):
        init_args = target + ([] if "--drafter" in PIPELINES[name] else drafter) + PIPELINES[name]
        spec = out / f"{name}.spec"
        spec.write_text(specir("init", *init_args))
        specir("bench", str(spec), "--target", args.target, "--limit", str(args.limit), "--max-new-tokens",
               str(args.max_new_tokens), "--out", str(out / name))
        rows[name] = json.loads((out / name / "bench.json").read_text())["rows"]
        print(f"{name}: done", file=sys.stderr)
    workloads = list(dict.fromkeys(r["workload"] for r in next(iter(rows.values()))))
    lines = [f"# Acceptance of {'the shipped pair' if not models else ' '.join(models)} ({datetime.date.today()})", "",
             f"Command: `python bench/acceptance_report.py {' '.join(sys.argv[1:])}` (each pipeline through `specir bench`, batch 1, "
             "greedy). tau = tokens emitted per target forward; `= AR` = outputs identical to autoregressive "
             "decoding. Speedups here are CPU reference-backend figures for a 7.6M-parameter target and say little "
             "about GPU serving; tau is the number that carries over.", "",
             "| pipeline | " + " | ".join(workloads) + " |", "|---|" + "---:|" * len(workloads)]
    for name, rs in rows.items():
        by = {r["workload"]: r for r in rs}
        lines.append(f"| {name} | " + " | ".join(f"tau {by[w]['tau']:.2f} ({by[w]['speedup']:.2f}x, "
                                                  f"{by[w]['agree_with_ar']:.0%} = AR)" for w in workloads) + " |")
    (out / "acceptance.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
