"""Fit the CPU target's step rates and per-op cost (targets.json "cpu": step_bandwidth, step_flops,
step_op_seconds) to measured decode steps of the shipped pair.

    specir init > p.spec
    specir compile p.spec --target cpu -p "batch-fusion{shrink=false}" -o b-chain
    specir compile p.spec --target cpu -p "ngram-draft,batch-fusion{shrink=false}" -o b-ngram
    specir bench b-chain --batch-size 1,2,3,4,8 --limit 8 --max-new-tokens 48 --out o-chain   # (and o-ngram)
    python bench/cpu_step_fit.py --chain o-chain/bench.json --ngram o-ngram/bench.json --spec b-chain/pipeline.spec

A step's measured seconds: batch / AR tok/s for AR, batch * tau / tok/s for the speculative build
(every workload's row averaged per batch size). Predicted: cost_model.forward_cost of each forward the
step runs (AR: the target over b rows; n-gram k: the target over (k + 1) b rows; chain k: k drafter
forwards over b rows, each ranking b rows of logits, then the target over (k + 1) b rows) plus the
model's graph ops times the per-op cost. Grid search of the three numbers minimising the mean
|log(predicted / measured)|; prints the best and each step's measured and predicted milliseconds.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math

FLOPS = [x * 1e9 for x in (8, 10, 12, 14, 16, 18, 20, 24, 28, 34, 40, 50, 70, 100)]
BANDWIDTHS = (5e9, 1e10, 2e10)
OP_SECONDS = [x * 1e-6 for x in range(0, 80, 2)]


def measured_steps(paths: dict[str, str]) -> dict[tuple[str, int], float]:
    steps: dict = collections.defaultdict(list)
    for kind, path in paths.items():
        for row in json.load(open(path))["rows"]:
            b = row["batch_size"]
            steps["ar", b].append(b / row["ar_tokens_per_s"])
            steps[kind, b].append(b * row["tau"] / row["tokens_per_s"])
    return {key: sum(v) / len(v) for key, v in steps.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chain", required=True, help="bench.json of the chain k build")
    ap.add_argument("--ngram", required=True, help="bench.json of the n-gram k build")
    ap.add_argument("--spec", required=True, help="a pipeline.spec with @target and @drafter (the chain build's)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--context", type=int, default=300)
    args = ap.parse_args()
    from specir.cost_model import forward_cost
    from specir.load import load_pipeline
    from specir.targets import get_target
    pipeline = load_pipeline(args.spec)
    target_model, drafter = pipeline.model("target"), pipeline.model("drafter")
    steps = measured_steps({"chain": args.chain, "ngram": args.ngram})
    base = dataclasses.replace(get_target("cpu"), step_op_seconds=0.0)

    def predict(t, kind: str, b: int) -> float:
        def forward(model, rows, ranked=0):
            return forward_cost(model, t, rows, args.context, b, ranked).seconds
        verify = forward(target_model, (args.k + 1) * b)
        return {"ar": forward(target_model, b), "ngram": verify,
                "chain": args.k * forward(drafter, b, b) + verify}[kind]

    best = None
    for flops in FLOPS:
        for bandwidth in BANDWIDTHS:
            for op_s in OP_SECONDS:
                t = dataclasses.replace(base, step_flops=flops, step_bandwidth=bandwidth, step_op_seconds=op_s)
                err = sum(abs(math.log(predict(t, k, b) / m)) for (k, b), m in steps.items()) / len(steps)
                if best is None or err < best[0]:
                    best = (err, t)
    err, t = best
    print(json.dumps({"step_bandwidth": t.step_bandwidth, "step_flops": t.step_flops,
                      "step_op_seconds": t.step_op_seconds, "mean_abs_log_error": round(err, 3)}))
    print("| step | batch | measured ms | predicted ms |\n|---|---:|---:|---:|")
    for (kind, b), m in sorted(steps.items()):
        print(f"| {kind} | {b} | {m * 1e3:.2f} | {predict(t, kind, b) * 1e3:.2f} |")


if __name__ == "__main__":
    main()
