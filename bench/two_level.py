"""Two-level verification against the best one-level pipeline, through `specir bench` (issue 16).

    python bench/two_level.py --out OUT [--target h200|cpu] [--zoo DIR] [--builds chain,tree,tl-layers,...]
                              [--workloads code-completion,docstrings,refactor,prose,long]
                              [--batch-sizes 1,8] [--limit 8] [--max-new-tokens 96] [--long-tokens 8192]
                              [--budget-s 560] [--no-check]

For each build (BUILDS: one-level chain and tree, and two-level variants) it runs `specir init`
on the pair in --zoo (default: the shipped pair; on the GPU first `python bench/h200_session.py
--stages inflate` puts the 8B-shape pair in /tmp/zoo8b), `specir compile --target T -p PASSES`, and
`specir bench BUILD --workload W --batch-size ... --check --json` (every timed token forced
against the declared target) per workload; `long` is `--prompts` of bench/long_context.py
(8k+ token prompts cut from the shipped corpus). Then the cost model's prediction for every build
and workload (speedup, tau, step seconds; acceptance profiled on the AR continuations of the
same prompts, the mid level's ranks included) goes beside the measurement. Writes OUT/session.json
and OUT/README.md (a table: build, workload, batch, AR tok/s, tok/s, speedup, tau, predicted
speedup and tau, mismatches), and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h200_session import ROOT, Session, specir  # noqa: E402

TREE = "tree-verify{budget=64,topk=8,depth=6}"
BUILDS = {
    "chain": "",                                                     # one level: chain k = 4
    "tree": TREE,                                                    # one level: the best at batch 1 on the H200
    "tl-layers": "two-level-verify{layers=LAYERS}",                  # mid: the target's first layers
    "tl-layers-tree": TREE + ",two-level-verify{layers=LAYERS}",
    "tl-ngram-drafter": "two-level-verify{kind=model,model=drafter,extend=4},ngram-draft{k=8}",  # ngram -> drafter -> target
    "tl-ngram-drafter-12": "two-level-verify{kind=model,model=drafter,extend=6},ngram-draft{k=12}",  # the cost model's best
    "tl-window": "two-level-verify{kind=window,window=256}",          # TriForce-style: the target with a short KV window
}


def _rows(text: str) -> dict | None:
    try:
        return json.loads(next(line for line in text.splitlines() if line.startswith("{")))
    except (StopIteration, ValueError):
        return None


def predictions(builds: dict, prompts_by_workload: dict, target_name: str, max_new: int, device: str) -> dict:
    """(build, workload) -> the cost model's prediction, acceptance profiled on the AR continuations."""
    from specir import acceptance_model
    from specir.calibration import Calibration, load
    from specir.load import load_pipeline
    from specir.prediction import predict
    from specir.runtime.baseline import ar_pipeline
    from specir.runtime.session import open_session, make_engine
    from specir.targets import get_target
    target = get_target(target_name)
    calibration = load(target) or Calibration.from_target(target)
    out = {}
    first = next(iter(builds.values()))
    session = open_session(str(first))
    ar = make_engine(ar_pipeline(session.pipeline), session.backend, session.device, session.build)
    for workload, prompts in prompts_by_workload.items():
        conts = [r.tokens for r in ar.generate(prompts, max_new)]
        profile = acceptance_model.profile(session.pipeline.model("drafter"), prompts, conts)
        profile.device = device
        for name, build in builds.items():
            pipeline = load_pipeline(str(build / "pipeline.spec"))
            try:
                out[(name, workload)] = predict(pipeline, target, calibration, profile).as_dict()
            except Exception as exc:  # noqa: BLE001 - reported beside the row
                out[(name, workload)] = {"error": str(exc)}
    return out


def workload_prompts(workload: str, long_file: str, limit: int, tokenizer_folder) -> list[list[int]]:
    from specir.zoo import workloads
    from specir.zoo.tokenizer import load_tokenizer
    if workload == "long":
        return [json.loads(line)["prompt_ids"] for line in open(long_file)][:limit]
    tok = load_tokenizer(tokenizer_folder / "tokenizer.json")
    return [tok.encode(r["prompt"]).ids for r in workloads.load(workload)[:limit]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default="h200")
    ap.add_argument("--zoo", default="", help="a folder with target/ and drafter/ (default: the shipped pair)")
    ap.add_argument("--builds", default="chain,tree,tl-layers,tl-layers-tree,tl-ngram-drafter")
    ap.add_argument("--layers", type=int, default=0, help="tl-layers: mid layers (0: half the target's)")
    ap.add_argument("--workloads", default="code-completion,docstrings,refactor,prose,long")
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--long-tokens", type=int, default=8192)
    ap.add_argument("--budget-s", type=float, default=560)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-predict", action="store_true")
    ap.add_argument("--predict-reserve-s", type=float, default=90, help="budget kept for the predictions")
    a = ap.parse_args(argv)
    from pathlib import Path

    from specir.zoo.paths import zoo_model_dir
    s = Session(a.out, a.budget_s)
    target_dir = Path(a.zoo) / "target" if a.zoo else zoo_model_dir("code-target")
    drafter_dir = Path(a.zoo) / "drafter" if a.zoo else zoo_model_dir("code-drafter")
    work = Path(a.out) / "builds"
    work.mkdir(parents=True, exist_ok=True)
    spec = work / "p.spec"
    with open(spec, "w") as f:
        subprocess.run(specir("init", "--target-model", str(target_dir), "--drafter", str(drafter_dir)), stdout=f,
                       check=True, cwd=ROOT, timeout=300)
    workloads = [w for w in a.workloads.split(",") if w]
    long_file = str(Path(a.out) / "long.jsonl")
    if "long" in workloads:
        s.sh([sys.executable, "bench/long_context.py", "--out", long_file, "--tokens", str(a.long_tokens),
              "--count", str(a.limit), "--tokenizer", str(target_dir)], "long.log", 300)
    builds = {}
    for name in [b for b in a.builds.split(",") if b]:
        passes = BUILDS[name].replace("LAYERS", str(a.layers))
        cmd = specir("compile", str(spec), "--target", a.target, "-o", str(work / name)) + (["-p", passes] if passes else [])
        code, _ = s.sh(cmd, "compile.log", 300)
        s.data["stages"][f"compile-{name}"] = {"exit": code, "passes": passes}
        if code == 0:
            builds[name] = work / name
    rows = []
    reserve = 0 if a.no_predict else a.predict_reserve_s  # the predictions need their time after the benches
    for name, build in builds.items():
        for w in workloads:
            if s.left() < reserve + 30:
                s.data["stages"][f"bench-{name}-{w}"] = {"skipped": f"{s.left():.0f} s left (predictions keep {reserve:.0f})"}
                continue
            src = ["--prompts", long_file] if w == "long" else ["--workload", w]
            cmd = specir("bench", str(build), *src, "--batch-size", a.batch_sizes, "--limit", str(a.limit),
                         "--max-new-tokens", str(a.max_new_tokens), "--json", "--out", str(Path(a.out) / f"bench-{name}-{w}"))
            code, text = s.sh(cmd + ([] if a.no_check else ["--check"]), f"bench-{name}.log", s.left() - reserve)
            result = _rows(text)
            for r in (result or {}).get("rows", []):
                rows.append({"build": name, "passes": s.data["stages"][f"compile-{name}"]["passes"], **r,
                             "workload": w})
            if result is None:
                s.data["stages"][f"bench-{name}-{w}"] = {"exit": code, "error": text.strip().splitlines()[-3:]}
            s.data["rows"] = rows
            s.write()
    if not a.no_predict and builds and s.left() > 30:
        prompts = {w: workload_prompts(w, long_file, a.limit, target_dir) for w in workloads}
        device = "cuda" if a.target != "cpu" else "cpu"
        preds = predictions(builds, prompts, a.target, a.max_new_tokens, device)
        for r in rows:
            p = preds.get((r["build"], r["workload"]), {})
            r["predicted_speedup"], r["predicted_tau"] = p.get("speedup"), p.get("tau")
            r["predicted_error"] = p.get("error")
        s.data["rows"] = rows
    s.data["total_s"] = round(time.time() - s.start, 1)
    s.write()
    lines = ["| build | workload | batch | AR tok/s | tok/s | speedup | tau | predicted speedup | predicted tau "
             "| mismatches | near-ties |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        lines.append(f"| {r['build']} | {r['workload']} | {r['batch_size']} | {fmt(r['ar_tokens_per_s'], '.1f')} | "
                     f"{fmt(r['tokens_per_s'], '.1f')} | {fmt(r['speedup'], '.2f')}x | {fmt(r['tau'], '.2f')} | "
                     f"{fmt(r.get('predicted_speedup'), '.2f')} | {fmt(r.get('predicted_tau'), '.2f')} | "
                     f"{r.get('mismatches')} | {r.get('near_ties')} |")
    table = "\n".join(lines)
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write(f"# two-level verification vs one level ({a.target})\n\n`python bench/two_level.py "
                f"{' '.join(argv or sys.argv[1:])}`\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
