"""An exhaustive sweep of a small space vs `specir search` restricted to the same space.

    python bench/search_sweep.py --spec p.spec --target cpu --budget 10 --out DIR
                                 [--seed-workload docstrings --seed-budget 8 --seeded-budget 15]
                                 [--sweep-report DIR/sweep/report.json] [--space cpu|gpu]
                                 [--stages sweep,search,seeded]

`--space gpu` is the space for the 8B shape on one GPU (chains, the lookup, trees up to 96 nodes, 14 levels deep);
`--stages` runs part of the plan now and resumes the folders already started, so a GPU run can
split over several device calls.

Each search has its own memory file (none sees the sweep's results; the first version of this
script shared one memory, so its search was seeded by the sweep on the same deployment). With
--seed-workload, a search on that workload fills a memory from which a second search on
--workload starts (the issue's "memory seeded by another workload"). All run through the
search's own evaluation (compile, guard, timing against AR in interleaved rounds, forcing of the
timed outputs); the sweep evaluates every candidate of the space; a search is `specir search --space
DIR/space-NAME.txt` (this script writes the file): the cost model ranks the whole space, the
proposer moves only inside it, and the search stops after its budget. Writes DIR/sweep/, DIR/search/ (and
DIR/seed-W/, DIR/seeded/), each a full search folder, and DIR/README.md: the sweep's best and, per
search, its best so far after each evaluation and when it reaches >= 95% of the sweep's best (by
its own measurement, and by the sweep's measurement of the same pipeline).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

STAGES = ("sweep", "search", "seeded")  # seeded: the seed search on --seed-workload, then the search from its memory
SPACES = {
    # the shipped pair on a CPU: the n-gram lookup, short chains, small trees
    "cpu": (["", "draft-shape{k=1}", "draft-shape{k=2}", "draft-shape{k=3}", "draft-shape{k=6}"]
            + [f"ngram-draft{{k={k},max_ngram={n}}}" for k in (2, 3, 4) for n in (2, 3)]
            + [f"draft-shape{{k={k}}},tree-verify{{budget={b},topk={t}}}" for k in (2, 4) for t in (2, 4) for b in (8, 16)]),
    # the 8B shape on one GPU at batch 1: chain depths, the lookup, trees up to 96 nodes and 14 levels deep (63 nodes:
    # 64 verify rows, one GEMM row tile; session 30)
    "gpu": (["", "draft-shape{k=2}", "draft-shape{k=3}", "draft-shape{k=6}", "ngram-draft{k=4}"]
            + [f"tree-verify{{budget={b},topk={t}}}" for b, t in ((16, 4), (32, 4), (32, 8), (64, 8))]
            + [f"tree-verify{{budget={b},topk=8,depth={d}}}" for b, d in ((32, 6), (64, 6), (63, 10), (64, 10), (96, 14))]
            + ["tree-verify{budget=64,topk=4,depth=10}"]),
}


def curve(search: dict, sweep_by_pipeline: dict, best: float) -> list[dict]:
    """Per evaluation: the search's best so far by its own measurement, and that same pipeline (by
    final-IR digest: spellings differ) as the sweep measured it (the noise-robust reading), each as
    a fraction of the sweep's best."""
    rows, chosen = [], None
    for i, c in enumerate(search["candidates"]):
        if c.get("measured_speedup") is not None and (chosen is None or c["measured_speedup"] > chosen["measured_speedup"]):
            chosen = c
        swept = sweep_by_pipeline.get(chosen["ir_digest"], {}).get("measured_speedup") if chosen else None
        rows.append({"evaluation": i + 1, "pipeline": chosen and chosen["pipeline"],
                     "own": chosen and round(chosen["measured_speedup"] / best, 3),
                     "by_sweep": None if swept is None else round(swept / best, 3)})
    return rows


def _reached(rows: list[dict], key: str):
    return next((r["evaluation"] for r in rows if (r[key] or 0) >= 0.95), None)


def main(argv=None) -> int:
    from specir.search.run import Search, Settings
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--workload", default="code-completion")
    ap.add_argument("--budget", type=int, default=10, help="evaluations of the search from an empty memory")
    ap.add_argument("--seed-workload", default="", help="also: a search on this workload fills a memory ...")
    ap.add_argument("--seed-budget", type=int, default=8, help="... with this many evaluations, and ...")
    ap.add_argument("--seeded-budget", type=int, default=15, help="... a search on --workload starts from it")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweep-report", default="", help="reuse this sweep's report.json instead of sweeping")
    ap.add_argument("--space", choices=sorted(SPACES), default="cpu", help="the pipelines swept (and searched)")
    ap.add_argument("--max-new-tokens", type=int, default=24, help="tokens per timed and guarded prompt")
    ap.add_argument("--candidate-memory", type=float, default=8.0, metavar="GB", help="memory limit of a candidate")
    ap.add_argument("--stages", default="sweep,search,seeded",
                    help="which of sweep, search, seeded to run now (a folder already run is resumed, so a "
                         "long run splits over several calls: the README is written when all have run)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    out = Path(args.out)
    space = SPACES[args.space]
    stages = set(args.stages.split(","))
    if stages - set(STAGES):
        ap.error(f"unknown --stages {sorted(stages - set(STAGES))}; known: {','.join(STAGES)}")

    space_file = out / f"space-{args.space}.txt"
    out.mkdir(parents=True, exist_ok=True)
    space_file.write_text("".join((t or "(input)") + "\n" for t in space))

    def run(name, memory, workload=args.workload, budget=10, sweep=None):
        """One search folder; each memory file is its own (a search never sees the sweep's results).
        A search runs through the CLI (`specir search --space`, which the README quotes); the sweep,
        which no CLI flag offers, through the same Search with Settings.sweep."""
        folder, resume = out / name, (out / name / "search.sqlite").exists()
        common = dict(target=args.target, workload=workload, budget=budget, workers=args.workers, rounds=args.rounds,
                      memory=str(out / memory), max_new_tokens=args.max_new_tokens)
        if sweep is None:
            from specir.cli.main import main as specir_main
            argv = ["search", args.spec, "--space", str(space_file), "--out", str(folder),
                    "--candidate-memory", str(args.candidate_memory)] + (["--resume"] if resume else [])
            for key, value in common.items():
                argv += ["--" + key.replace("_", "-"), str(value)]
            print("specir " + " ".join(argv), flush=True)
            code = specir_main(argv)
            if code not in (0, 1):  # 1: nothing validated (the report says so); else an error or Ctrl-C
                raise SystemExit(code)
            return json.loads((folder / "report.json").read_text())
        s = Search(Settings(out=str(folder), resume=resume, spec=args.spec, memory_limit_gb=args.candidate_memory,
                            sweep=sweep, **common))
        s.prepare()
        return s.run()

    def stage(name, folder, memory, **kw):
        """Run `name` now, or read what an earlier call of it wrote (None when it has not run)."""
        if name in stages:
            return run(folder, memory, **kw)
        done = out / folder / "report.json"
        return json.loads(done.read_text()) if done.is_file() else None

    if args.sweep_report:  # an earlier sweep of the same space and workload (its report.json)
        sweep = json.loads(Path(args.sweep_report).read_text())
    else:
        sweep = stage("sweep", "sweep", "sweep-memory.sqlite", budget=len(space), sweep=space)
    found = {"empty memory": (stage("search", "search", "search-memory.sqlite", budget=args.budget), args.budget)}
    if args.seed_workload:
        if "seeded" in stages:
            run("seed-" + args.seed_workload, "seeded-memory.sqlite", workload=args.seed_workload, budget=args.seed_budget)
        found[f"memory seeded on {args.seed_workload}"] = (
            stage("seeded", "seeded", "seeded-memory.sqlite", budget=args.seeded_budget), args.seeded_budget)
    missing = [label for label, (r, _) in {"the sweep": (sweep, 0), **found}.items() if r is None]
    if missing:
        print(f"not yet run: {', '.join(missing)}; the README is written when every stage has a report "
              f"(--stages {','.join(STAGES)})")
        return 0
    searches = found
    by_pipeline = {c["ir_digest"]: c for c in sweep["candidates"] if c.get("ir_digest")}
    best = sweep["best"]
    machine = ("shared 2-core CPU VM; other jobs ran meanwhile, so timings are noisy" if args.space == "cpu"
               else f"one GPU ({args.target}), candidates timed one at a time")
    lines = [f"# {args.space.upper()} sweep of {len(space)} pipelines vs searches on the same space", "",
             f"- command: `python bench/search_sweep.py {' '.join(sys.argv[1:] if argv is None else argv)}`",
             f"- machine: {machine} (each speedup is the median of {args.rounds} rounds interleaved with AR)",
             f"- sweep best: `{best['pipeline'] or '(input)'}` {best['speedup']:.3f}x (tau {best['tau']:.2f})",
             f"- cost model rank correlation (sweep): {sweep['rank_correlation']}", ""]
    summary = {"sweep_best": best}
    for label, (search, budget) in searches.items():
        rows = curve(search, by_pipeline, best["speedup"])
        own, swept = _reached(rows, "own"), _reached(rows, "by_sweep")
        lines += [f"## Search, {label} (budget {budget})", "",
                  f"- best: `{search['best']['pipeline'] or '(input)'}` {search['best']['speedup']:.3f}x by its own measurement",
                  "- >= 95% of the sweep's best by its own measurement: " + (f"after {own} evaluations" if own else
                                                                              f"not within {budget}"),
                  "- >= 95% by the sweep's measurement of the search's best so far: " + (
                      f"after {swept} evaluations" if swept else f"not within {budget}"),
                  "- order: " + ", ".join(f"`{c['pipeline'] or '(input)'}`" for c in search["candidates"]), ""]
        summary[label] = {"best": search["best"], "curve": rows, "reached_95_own": own, "reached_95_by_sweep": swept}
    lines += ["## The sweep", "", "| pipeline | sweep predicted | sweep measured | tau | status |",
              "|---|---:|---:|---:|---|"]
    for c in sorted(sweep["candidates"], key=lambda c: -(c["measured_speedup"] or 0)):
        lines.append(f"| `{c['pipeline'] or '(input)'}` | {c['predicted_speedup'] or 0:.2f} | "
                     f"{c['measured_speedup'] or 0:.3f} | {c['tau'] or 0:.2f} | {c['status']} |")
    (out / "README.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\n".join(lines[:20]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
