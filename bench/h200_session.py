"""One GPU session of the README's GPU flow, through the CLI a user runs (no script-only figures).

    python bench/h200_session.py --out $OUT [--stages inflate,compile,bench,agree,gpu_bench,tests]
                                 [--builds chain,tree,tree-bf12,chain-bf,tree-bf] [--batch-sizes 1,8,32,64] [--budget-s 560]

Stages (each skipped when the remaining budget cannot fit it; each writes under OUT as it goes):
  tests      (run last, in the time left) the kernel and backend tests on the GPU, four pytest
             processes at once (TEST_GROUPS: tests/triton_backend, tests/step, tests/triton,
             tests/bf12_pipeline + tests/hybrid/test_triton_recurrent.py): summaries in session.json
  inflate    `specir zoo inflate` of the shipped pair: the target to the Llama-3.1-8B shape and the
             drafter to llama-1b-width-3l (1B width, the trained 3 layers), on the GPU, to /tmp/zoo8b
  compile    `specir init` (chain, k = 4) and `specir compile --target h200` for each build:
             chain (no passes), tree (tree-verify{budget=64,topk=8,depth=6}), tree-bf12 (then
             pack-weights{format=bf12})
  bench      `specir bench BUILD --workload code-completion --batch-size ... --check` per build:
             decode tok/s, speedup over AR in the same run, tau, every timed output token-forced
  flow       the README's `specir run BUILD --prompt ... --json` and `specir check BUILD --workload
             code-completion --limit 4 --batch-size 4` per build (the guard against the declared target)
  agree      `python bench/gpu_bench.py --e2e ...`: its e2e section (specir.runtime.bench on engines it
             builds itself, weights inflated in memory) on the CLI's workload, prompts, tokens and
             batch sizes, row by row against the CLI's tree / chain figures (the 5 % agreement)
  gpu_bench  `python bench/gpu_bench.py --quick` (every section) on the same weights
Builds: chain, tree, tree-bf12, chain-bf, tree-bf (batch-fusion with the shrink table) and tree-bf-narrow. A build
folder a warm machine kept from the last call is reused. A table of the bench rows is printed last;
OUT/session.json holds everything (the builds' pipeline.spec, bench rows, agreement), OUT/log.txt
every command's output.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import _checkout  # noqa: F401  (a plain checkout runs too)
from specir.passes.fusion import LATE_DEFAULTS  # (imports specir, about 2 s: the builds' A/B names its fusions)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = "/tmp/zoo8b"
SHAPES = {"target": "llama-3.1-8b", "drafter": "llama-1b-width-3l"}
TREE = "tree-verify{budget=64,topk=8,depth=6}"
DRAFT_VOCAB = "draft-vocab{size=32768,order=frequency}"
FR = TREE + "," + DRAFT_VOCAB
ALL = LATE_DEFAULTS  # the fusions that were opt-in before session 25 (passes/fusion.py)


def _fusion(*on: str, models: str = "") -> str:
    """A fusion pass stating the four fusions of ALL (the pass sets every flag it is not given to its
    default: passes/fusion.py FUSION_DEFAULTS): those in `on` on, the others off."""
    flags = ",".join(f"{f}={'true' if f in on else 'false'}" for f in ALL)
    return f"fusion{{{flags}{',models=' + models if models else ''}}}"
BUILDS = {"chain": "", "tree": TREE, "tree-bf12": TREE + ",pack-weights{format=bf12}",
          # the drafter proposes from its 32768 most frequent ids (of 128256; zoo documents): a level's head 4x smaller;
          # every fusion at its default (all on since session 25)
          "tree-fr": FR,
          # tree-fr with the four fusions that were opt-in before session 25 off (the A/B of the defaults)
          "tree-fr-unfused": FR + "," + _fusion(),
          # only the swiglu in the down projection's prologue
          "tree-fr-sw": FR + "," + _fusion("swiglu_linear"),
          # the drafter's 8-row level forwards on the Triton skinny GEMM (cuBLAS from 16 rows) with the swiglu in
          # the down projection's prologue (session 25, H100: draft 2.139 ms against tree-fr's 1.972 on cuBLAS)
          "tree-fr-dt": FR + ",gemm-policy{models=drafter,cublas_min_rows=16}," + _fusion("swiglu_linear", models="drafter"),
          # the same with the drafter's norm_linear (session 25: 3.706 ms, its GEMM norm prologue; since then
          # norm_linear folds into one-row forwards only, backends/triton/fused_parts.py)
          "tree-fr-dtn": FR + ",gemm-policy{models=drafter,cublas_min_rows=16},"
                         + _fusion("swiglu_linear", "norm_linear", models="drafter"),
          # the norms in the next linear's prologue and the residual adds in the previous one's epilogue (issue 17),
          # with the swiglu in the down projection's prologue
          "tree-fr-nl": FR + "," + _fusion("swiglu_linear", "norm_linear"),
          # the same with every linear launch overlapping the drain of the launch before it (launch_overlap)
          "tree-fr-nlo": FR + "," + _fusion("swiglu_linear", "norm_linear", "launch_overlap"),
          "tree-fr-o": FR + "," + _fusion("launch_overlap"),
          # every fusion of issue 17 stated (the defaults since session 25: the same build as tree-fr)
          "tree-fr-all": FR + "," + _fusion(*ALL),
          "tree-bf12-all": TREE + ",pack-weights{format=bf12}," + _fusion(*ALL),
          # tree-fr on BF12 weights: its 65-row verify on Triton's GEMM (linear_config.GEMM_TILES), 25 % fewer bytes
          "tree-fr-bf12": FR + ",pack-weights{format=bf12}",
          # issue 14: the packed verify with the per-batch-size draft budget (shrink), priced for the
          # code pair's acceptance (tau 3.6 at k = 4: about 0.85 per token)
          "chain-bf": "batch-fusion{shrink=true,alpha=0.85}",
          "tree-bf": TREE + ",batch-fusion{shrink=true,alpha=0.85}",
          # the same with the draft narrowed to what the budget keeps (draft.tree topk_at)
          "tree-bf-narrow": TREE + ",batch-fusion{shrink=true,alpha=0.85,narrow=true}",
          # issue 14's done-when, verbatim: every option at its default (no budget: each request its whole tree)
          "issue-bf": "tree-verify,batch-fusion",
          # the defaults of the chain, and the default tree with the draft narrowed to what the budget keeps
          "chain-default": "batch-fusion",
          "issue-bf-narrow": "tree-verify,batch-fusion{narrow=true}",
          # the README's GPU section, verbatim (tests/step/test_readme_gpu_pipelines.py checks them on a CPU)
          "readme-tree": "tree-verify",
          "readme-bf12": "tree-verify{budget=64},pack-weights{format=bf12}",
          "readme-bf": "batch-fusion{shrink=true,alpha=0.85}",
          # autoregressive (`specir init --drafter none`, AR_BUILDS): bench's speedup is then a pass's alone over the
          # stock target's AR, e.g. BF12's AR step against bf16's (issue 17's BF12 target through the CLI)
          "ar": "", "ar-bf12": "pack-weights{format=bf12}"}
AR_BUILDS = {"ar", "ar-bf12"}   # compiled from ar.spec (no drafter) instead of p.spec


def build_passes(name: str) -> str:
    """The -p of a build: BUILDS[name], or tree-fr's shape family `tree-fr-d<depth>k<topk>b<budget>[v<size>][-ap]`
    (deeper trees: on the shipped pair, whose tau the inflated 8B pair matches, depth 10 accepts 7.3-7.5
    tokens a step at code completion against 5.6 at depth 6; v: the draft vocabulary's size, 32768 if not
    given; a budget of 63 verifies 64 rows, one GEMM row tile; -ap: with fusion{attention_prefetch=true})."""
    shape = re.fullmatch(r"tree-fr-d(\d+)k(\d+)b(\d+)(?:v(\d+))?(-ap)?", name)
    if name not in BUILDS and shape:
        depth, topk, budget, size, prefetch = shape.groups()
        vocab = DRAFT_VOCAB if size is None else f"draft-vocab{{size={size},order=frequency}}"
        return (f"tree-verify{{budget={budget},topk={topk},depth={depth}}},{vocab}"
                + (",fusion{attention_prefetch=true}" if prefetch else ""))
    return BUILDS[name]


# the CLI build each gpu_bench e2e pipeline is compared with (same drafter shape, same draft)
AGREE = {"tree": "tree-3l", "chain": "chain-3l"}


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
        with open(os.path.join(self.out, "log.txt"), "a") as f:  # one log: at most 8 files come back
            f.write(f"==== {log}\n$ {' '.join(cmd)}\n{text}\n[exit {code} after {time.time() - t0:.1f} s]\n")
        self.data["commands"].append({"cmd": " ".join(cmd), "exit": code, "seconds": round(time.time() - t0, 1)})
        self.write()
        print(f"  -> exit {code} in {time.time() - t0:.1f} s", flush=True)
        return code, text

    def write(self):
        with open(os.path.join(self.out, "session.json"), "w") as f:
            json.dump(self.data, f, indent=1)


TEST_GROUPS = [["tests/triton_backend"], ["tests/step"], ["tests/triton"],
               ["tests/bf12_pipeline", "tests/hybrid/test_triton_recurrent.py"]]


def run_test_groups(s: "Session", timeout: float) -> dict:
    """The GPU test groups in parallel processes (serially they outrun one 600 s call): per group
    its exit code and pytest's summary lines; every group's output goes to the session log."""
    procs = []
    for group in TEST_GROUPS:
        cmd = [sys.executable, "-m", "pytest", *group, "-p", "no:cacheprovider", "-rfE", "-o", "addopts="]
        procs.append((group, cmd, subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                   text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))))
    t0, result = time.time(), {}
    for group, cmd, proc in procs:
        try:
            text, _ = proc.communicate(timeout=max(5.0, timeout - (time.time() - t0)))
            code = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            text, code = proc.communicate()[0] or "", 124
        with open(os.path.join(s.out, "log.txt"), "a") as f:
            f.write(f"==== gpu-tests {' '.join(group)}\n$ {' '.join(cmd)}\n{text}\n[exit {code}]\n")
        result[" ".join(group)] = {"exit": code, "summary": [ln for ln in text.strip().splitlines() if
                                                            " passed" in ln or " failed" in ln or "FAILED" in ln][-8:]}
    s.data["commands"].append({"cmd": "parallel pytest groups: " + "; ".join(" ".join(g) for g in TEST_GROUPS),
                               "exit": max(r["exit"] for r in result.values()), "seconds": round(time.time() - t0, 1)})
    s.write()
    return result


def _json_line(text: str) -> dict:
    """The JSON object a `--json` CLI run printed on a line of its own (StopIteration/ValueError if none)."""
    return json.loads(next(line for line in text.splitlines() if line.startswith("{")))


def _head() -> str:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=ROOT).stdout
    return proc.stdout.strip() + ("+dirty" if dirty.strip() else "")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def specir(*args) -> list[str]:
    return [sys.executable, "-m", "specir.cli.main", *args]


def main(argv=None) -> int:
    global ZOO
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--stages", default="inflate,compile,bench,agree,gpu_bench,tests")
    ap.add_argument("--builds", default="chain,tree,tree-bf12")
    ap.add_argument("--batch-sizes", default="1,8,32,64")
    ap.add_argument("--workload", default="code-completion", help="a shipped workload, several joined by +, or all (every one)")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--budget-s", type=float, default=560)
    ap.add_argument("--zoo", default=ZOO, help="where the inflated pair and the builds go")
    ap.add_argument("--shapes", default="", help="e.g. target=test-target,drafter=test-drafter (a CPU dry run)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bench-limit-s", type=float, default=300, help="wall-time cap of one build's bench")
    args = ap.parse_args(argv)
    ZOO = args.zoo
    shapes = dict(SHAPES, **dict(kv.split("=") for kv in args.shapes.split(",") if kv))
    stages = args.stages.split(",")
    s = Session(args.out, args.budget_s)
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
        if AR_BUILDS & set(builds):
            with open(f"{ZOO}/ar.spec", "w") as f:
                proc = subprocess.run(specir("init", "--target-model", f"{ZOO}/target", "--drafter", "none"),
                                      stdout=f, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=180)
            s.data["stages"]["init-ar"] = {"exit": proc.returncode, "stderr": proc.stderr[-2000:]}
        for b in builds:
            build, passes = f"{ZOO}/build-{b}", build_passes(b)
            stamp = json.dumps({"commit": _head(), "passes": passes})
            if os.path.isfile(f"{build}/pipeline.spec") and _read(f"{build}.stamp") == stamp:
                s.data["stages"][f"compile-{b}"] = "kept"  # a warm machine keeps the last call's builds
            else:
                cmd = specir("compile", f"{ZOO}/{'ar' if b in AR_BUILDS else 'p'}.spec", "--target", "h200", "-o", build)
                if passes:
                    cmd += ["-p", passes]
                code, _ = s.sh(cmd, "compile", 240)
                s.data["stages"][f"compile-{b}"] = code
                if code == 0:
                    with open(f"{build}.stamp", "w") as f:
                        f.write(stamp)
            if os.path.isfile(f"{build}/pipeline.spec"):
                s.data.setdefault("specs", {})[b] = open(f"{build}/pipeline.spec").read()
    if "bench" in stages:
        rows = []
        # all: every shipped workload in one bench; W+W: one bench per workload
        sources = [[]] if args.workload == "all" else [["--workload", w] for w in args.workload.split("+")]
        for b in builds:
            for source in sources:
                tag = f"{b}-{source[1]}" if source else b
                out = os.path.join("/tmp/specir-bench", tag)
                code, text = s.sh(specir("bench", f"{ZOO}/build-{b}", *source, "--batch-size",
                                         args.batch_sizes, "--limit", str(args.limit), "--max-new-tokens",
                                         str(args.max_new_tokens), "--check", "--json", "--out", out),
                                  f"bench-{tag}", args.bench_limit_s)
                try:
                    result = _json_line(text)
                    for r in result["rows"]:
                        rows.append({"build": b, **r})
                    s.data["stages"][f"bench-{tag}"] = {"exit": code, "setup_s": result.get("setup_s")}
                except (StopIteration, ValueError, KeyError):
                    s.data["stages"][f"bench-{tag}"] = {"exit": code, "error": text.strip().splitlines()[-3:]}
                s.data["bench_rows"] = rows
                s.write()
    if "flow" in stages:  # the README's `specir run` and `specir check` on each build
        for b in builds:
            build = f"{ZOO}/build-{b}"
            code, text = s.sh(specir("run", build, "--prompt", "def parse_args(", "--max-new-tokens", "128",
                                     "--json"), f"run-{b}", 180)
            try:
                result = _json_line(text)
                run = {"exit": code, **{k: result.get(k) for k in ("tokens_per_s", "setup_s", "text")}}
            except (StopIteration, ValueError):
                run = {"exit": code, "error": text.strip().splitlines()[-3:]}
            code, text = s.sh(specir("check", build, "--workload", "code-completion", "--limit", "4",
                                     "--max-new-tokens", "48", "--batch-size", "4"), f"check-{b}", 300)
            s.data["stages"][f"flow-{b}"] = {"run": run, "check": {"exit": code,
                                                                   "summary": text.strip().splitlines()[-3:]}}
            s.write()
    if "agree" in stages and s.left() <= 90:
        s.data["stages"]["agree"] = {"skipped": f"{s.left():.0f} s of the budget left (needs 90)"}
    if "agree" in stages and s.left() > 90 and args.device == "cuda":
        # gpu_bench's e2e on the CLI's settings, in the same process run as the CLI rows above
        names = ",".join(AGREE[b] for b in builds if b in AGREE)
        spec = f"{args.workload}:{args.limit}:{args.max_new_tokens}:{args.batch_sizes}:{names}"
        gout = "/tmp/specir-gpu-bench"
        code, text = s.sh([sys.executable, "bench/gpu_bench.py", "--out", gout, "--e2e", spec, "--budget-s",
                           str(max(60, s.left() - 20)), "--skip", "ar_step", "breakdown", "verify", "draft", "peers"],
                          "agree", s.left() - 10)
        try:
            e2e = json.load(open(f"{gout}/gpu_bench.json"))["sections"]["e2e"]["rows"]
        except (OSError, ValueError, KeyError) as exc:
            e2e = []
            s.data["stages"]["agree"] = {"exit": code, "error": str(exc), "tail": text.strip().splitlines()[-5:]}
        agreement = []
        for r in s.data.get("bench_rows", []):
            g = next((x for x in e2e if x.get("pipeline") == AGREE.get(r["build"]) and x.get("workload") == r.get("workload")
                      and x.get("batch_size") == r["batch_size"] and "tokens_per_s" in x), None)
            if g:
                agreement.append({"build": r["build"], "gpu_bench": g["pipeline"], "workload": r.get("workload"),
                                  "batch_size": r["batch_size"],
                                  "cli_tokens_per_s": r["tokens_per_s"], "gpu_bench_tokens_per_s": g["tokens_per_s"],
                                  "cli_speedup": r["speedup"], "gpu_bench_speedup": g["speedup"],
                                  "ratio": round(g["tokens_per_s"] / r["tokens_per_s"], 3),
                                  "gpu_bench_mismatches": g.get("mismatches")})
        s.data["agreement"] = agreement
        s.data["gpu_bench_e2e"] = e2e
        s.write()
    if "gpu_bench" in stages and s.left() <= 120:
        s.data["stages"]["gpu_bench"] = {"skipped": f"{s.left():.0f} s of the budget left (needs 120)"}
    if "gpu_bench" in stages and s.left() > 120 and args.device == "cuda":
        code, text = s.sh([sys.executable, "bench/gpu_bench.py", "--out", os.path.join(args.out, "gpu_bench"),
                           "--quick", "--budget-s", str(max(60, s.left() - 30)), "--skip", "peers"],
                          "gpu_bench.log", s.left() - 10)
        s.data["stages"]["gpu_bench"] = {"exit": code, "summary": text.strip().splitlines()[-25:]}
    if "tests" in stages and s.left() <= 40:
        s.data["stages"]["tests"] = {"skipped": f"{s.left():.0f} s of the budget left (needs 40)"}
    if "tests" in stages and s.left() > 40:  # last: it takes whatever time is left
        s.data["stages"]["tests"] = run_test_groups(s, s.left() - 10)
    s.data["total_s"] = round(time.time() - s.start, 1)
    s.write()
    print("\nbuild      workload         batch  AR tok/s   tok/s  speedup  tau   mismatches")
    for r in s.data.get("bench_rows", []):
        print(f"{r['build']:10s} {r.get('workload', ''):16s} {r['batch_size']:5d} {r['ar_tokens_per_s']:9.1f} {r['tokens_per_s']:7.1f} "
              f"{r['speedup']:7.2f}x {r['tau']:5.2f} {r.get('mismatches')}")
    for k, v in s.data["stages"].items():
        print(f"{k}: {v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items() if kk != 'summary'}}")
    for a in s.data.get("agreement", []):
        print(f"agree {a['build']:6s} vs {a['gpu_bench']:8s} {a.get('workload')} b{a['batch_size']}: CLI {a['cli_tokens_per_s']:.1f} "
              f"gpu_bench {a['gpu_bench_tokens_per_s']:.1f} tok/s (ratio {a['ratio']:.3f})")
    if "tests" in s.data["stages"]:
        for group, r in s.data["stages"]["tests"].items():
            print(f"tests {group}: {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
