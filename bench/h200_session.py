"""One GPU session of the README's GPU flow, through the CLI a user runs (no script-only figures).

    python bench/h200_session.py --out $OUT [--stages tests,inflate,compile,bench,gpu_bench]
                                 [--builds chain,tree,tree-bf12] [--batch-sizes 1,8,32,64] [--budget-s 560]

Stages (each skipped when the remaining budget cannot fit it; each writes under OUT as it goes):
  tests      the kernel and backend tests on the GPU (pytest tests/triton tests/triton_backend
             tests/bf12_pipeline tests/step): summary in OUT/gpu_tests.txt
  inflate    `specir zoo inflate` of the shipped pair: the target to the Llama-3.1-8B shape and the
             drafter to llama-1b-width-3l (1B width, the trained 3 layers), on the GPU, to /tmp/zoo8b
  compile    `specir init` (chain, k = 4) and `specir compile --target h200` for each build:
             chain (no passes), tree (tree-verify{budget=64,topk=8,depth=6}), tree-bf12 (then
             pack-weights{format=bf12})
  bench      `specir bench BUILD --workload code-completion --batch-size ... --check` per build:
             decode tok/s, speedup over AR in the same run, tau, every timed output token-forced
  gpu_bench  `python bench/gpu_bench.py --quick` on the same weights (in memory) for the 5 %
             agreement check against the CLI's figures
A table of the bench rows is printed last; OUT/session.json holds everything.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = "/tmp/zoo8b"
SHAPES = {"target": "llama-3.1-8b", "drafter": "llama-1b-width-3l"}
BUILDS = {"chain": "", "tree": "tree-verify{budget=64,topk=8,depth=6}",
          "tree-bf12": "tree-verify{budget=64,topk=8,depth=6},pack-weights{format=bf12}"}


class Session:
    def __init__(self, out: str, budget_s: float):
        self.out, self.start, self.budget = out, time.time(), budget_s
        self.data = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "stages": {}, "commands": []}
        os.makedirs(out, exist_ok=True)

    def left(self) -> float:
        return self.budget - (time.time() - self.start)

    def sh(self, cmd: list[str], log: str, timeout: float) -> tuple[int, str]:
        t0 = time.time()
        timeout = max(5.0, min(timeout, self.left() - 5))
        print(f"$ {' '.join(cmd)}  (limit {timeout:.0f} s)", flush=True)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                                  env=dict(os.environ, PYTHONUNBUFFERED="1"))
            code, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            code = 124
            text = ((exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")) \
                + ((exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or ""))
        with open(os.path.join(self.out, log), "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{text}\n[exit {code} after {time.time() - t0:.1f} s]\n")
        self.data["commands"].append({"cmd": " ".join(cmd), "exit": code, "seconds": round(time.time() - t0, 1)})
        self.write()
        print(f"  -> exit {code} in {time.time() - t0:.1f} s", flush=True)
        return code, text

    def write(self):
        with open(os.path.join(self.out, "session.json"), "w") as f:
            json.dump(self.data, f, indent=1)


def specir(*args) -> list[str]:
    return [sys.executable, "-m", "specir.cli.main", *args]


def main(argv=None) -> int:
    global ZOO
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--stages", default="tests,inflate,compile,bench,gpu_bench")
    ap.add_argument("--builds", default="chain,tree,tree-bf12")
    ap.add_argument("--batch-sizes", default="1,8,32,64")
    ap.add_argument("--workload", default="code-completion")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--budget-s", type=float, default=560)
    ap.add_argument("--zoo", default=ZOO, help="where the inflated pair and the builds go")
    ap.add_argument("--shapes", default="", help="e.g. target=test-target,drafter=test-drafter (a CPU dry run)")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)
    ZOO = args.zoo
    shapes = dict(SHAPES, **dict(kv.split("=") for kv in args.shapes.split(",") if kv))
    stages = args.stages.split(",")
    s = Session(args.out, args.budget_s)
    if "tests" in stages:
        code, text = s.sh([sys.executable, "-m", "pytest", "tests/triton", "tests/triton_backend", "tests/bf12_pipeline",
                           "tests/step", "-q", "-x", "-p", "no:cacheprovider"], "gpu_tests.txt", 240)
        s.data["stages"]["tests"] = {"exit": code, "summary": text.strip().splitlines()[-1:] if text else []}
    if "inflate" in stages:
        from specir.zoo.paths import zoo_model_dir
        for name, shape in shapes.items():
            if not os.path.isdir(f"{ZOO}/{name}"):
                code, _ = s.sh(specir("zoo", "inflate", str(zoo_model_dir(f"code-{name}")), "--shape", shape,
                                      "--out", f"{ZOO}/{name}", "--device", args.device), "inflate.log", 200)
                s.data["stages"][f"inflate-{name}"] = code
    builds = [b for b in args.builds.split(",") if b]
    if "compile" in stages:
        os.makedirs(ZOO, exist_ok=True)
        with open(f"{ZOO}/p.spec", "w") as f:
            proc = subprocess.run(specir("init", "--target-model", f"{ZOO}/target", "--drafter", f"{ZOO}/drafter"),
                                  stdout=f, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=180)
        s.data["stages"]["init"] = {"exit": proc.returncode, "stderr": proc.stderr[-2000:]}
        for b in builds:
            cmd = specir("compile", f"{ZOO}/p.spec", "--target", "h200", "-o", f"{ZOO}/build-{b}")
            if BUILDS[b]:
                cmd += ["-p", BUILDS[b]]
            code, _ = s.sh(cmd, "compile.log", 240)
            s.data["stages"][f"compile-{b}"] = code
    if "bench" in stages:
        rows = []
        for b in builds:
            out = os.path.join(args.out, f"bench-{b}")
            code, text = s.sh(specir("bench", f"{ZOO}/build-{b}", "--workload", args.workload, "--batch-size",
                                     args.batch_sizes, "--limit", str(args.limit), "--max-new-tokens",
                                     str(args.max_new_tokens), "--check", "--json", "--out", out),
                              f"bench-{b}.log", 300)
            try:
                result = json.loads(next(line for line in text.splitlines() if line.startswith("{")))
                for r in result["rows"]:
                    rows.append({"build": b, **r})
                s.data["stages"][f"bench-{b}"] = {"exit": code, "setup_s": result.get("setup_s")}
            except (StopIteration, ValueError, KeyError):
                s.data["stages"][f"bench-{b}"] = {"exit": code, "error": text.strip().splitlines()[-3:]}
            s.data["bench_rows"] = rows
            s.write()
    if "gpu_bench" in stages and s.left() > 120 and args.device == "cuda":
        code, text = s.sh([sys.executable, "bench/gpu_bench.py", "--out", os.path.join(args.out, "gpu_bench"),
                           "--quick", "--budget-s", str(max(60, s.left() - 30)), "--skip", "peers"],
                          "gpu_bench.log", s.left() - 10)
        s.data["stages"]["gpu_bench"] = {"exit": code, "summary": text.strip().splitlines()[-25:]}
    s.data["total_s"] = round(time.time() - s.start, 1)
    s.write()
    print("\nbuild      batch  AR tok/s   tok/s  speedup  tau   mismatches")
    for r in s.data.get("bench_rows", []):
        print(f"{r['build']:10s} {r['batch_size']:5d} {r['ar_tokens_per_s']:9.1f} {r['tokens_per_s']:7.1f} "
              f"{r['speedup']:7.2f}x {r['tau']:5.2f} {r.get('mismatches')}")
    for k, v in s.data["stages"].items():
        print(f"{k}: {v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items() if kk != 'summary'}}")
    if "tests" in s.data["stages"]:
        print("tests:", s.data["stages"]["tests"]["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
