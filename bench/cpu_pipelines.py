"""CPU pipelines benchmark: tokens/s of autoregressive and speculative pipelines (chain, tree,
n-gram) on the TVM backend against the torch reference backend, on the same weights, measured
interleaved in one run (rounds alternate backends, so machine load hits both alike).

    SPECIR_THREADS=1 python bench/cpu_pipelines.py --out bench/results/cpu_pipelines.md
    # 1B-class target (and a drafter with the same 128256-token vocabulary, which the verifier
    # requires; it keeps the trained drafter's function):
    specir zoo inflate specir/zoo/models/code-target --shape llama-1b-hd128 --out /tmp/t1b --device cpu
    python bench/cpu_pipelines.py --inflate-drafter /tmp/d128k
    SPECIR_THREADS=1 python bench/cpu_pipelines.py --big-target /tmp/t1b --big-drafter /tmp/d128k --out ...

Rows per model set: AR (the stock target, one token per forward), chain (k = 4), tree
(tree-verify, budget 12, top-k 3) and n-gram (k = 4) pipelines; each on `torch` (reference
kernels) and `tvm`; plus `tvm naive` for AR: the same TVM op table with unscheduled linear
layers, to show what the schedule buys. Batch 1, greedy, prompts from the shipped
code-completion workload. Every row's tokens are checked by token forcing against the
stock target on the reference backend (checked / mismatches / near-ties).
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("SPECIR_THREADS", "1")

import torch  # noqa: E402

from specir.cli.cmd_init import pipeline_text  # noqa: E402
from specir.load import load_pipeline  # noqa: E402
from specir.pass_infra import PassManager, build_passes  # noqa: E402
from specir.runtime.baseline import ar_pipeline  # noqa: E402
from specir.runtime.engine import Engine  # noqa: E402
from specir.runtime.tokenizer import encode  # noqa: E402
from specir.runtime.weights import load_weights, model_folder  # noqa: E402

ZOO = "zoo pair"
BIG = "1B-class"
NAIVE_PROMPT, NAIVE_TOKENS = 4, 6  # the unscheduled rows: a 4-token prompt, 6 new tokens, one round
PIPELINES = {  # name -> (drafter?, k, passes)
    "chain": (True, 4, ""),
    "tree": (True, 4, "tree-verify{budget=12,topk=3}"),
    "ngram": (False, 4, ""),
}


def drafter_shape():
    """The shipped drafter's own dims x 2 with the 1B target's vocabulary (tied, llama-3.2 rope)."""
    from specir.zoo.architectures import ROPE_LLAMA32
    from specir.zoo.shapes import Shape
    return Shape("drafter-v128k", 256, 3, 8, 2, 64, 768, 128256, True, ROPE_LLAMA32,
                 note="the zoo drafter with the 1B target's vocabulary")


def make_pipelines(target: str, drafter: str) -> dict:
    pipes = {}
    for name, (drafted, k, passes) in PIPELINES.items():
        p = load_pipeline("<bench>", text=pipeline_text(name, target, drafter if drafted else "ngram", k))
        if passes:
            p = PassManager(build_passes(passes)).run(p)
        pipes[name] = p
    pipes = {"ar": ar_pipeline(pipes["chain"]), **pipes}
    return pipes


class Weights:
    """Each checkpoint loaded once, shared by every engine of both backends."""

    def __init__(self):
        self.by_source = {}

    def of(self, pipeline) -> dict:
        used = {s.lstrip("@") for op in pipeline.step.ops for s in op.symbols}
        out = {}
        for m in pipeline.models:
            if m.name in used:
                src = str(m.attrs["source"])
                if src not in self.by_source:
                    self.by_source[src] = load_weights(m, "cpu")
                out[m.name] = self.by_source[src]
        return out


def tvm_table(pipeline, schedule: str):
    from specir.backends.tvm.kernel_cache import KernelCache
    from specir.backends.tvm.kernel_plan import ensure_compiled, plan_kernels
    from specir.backends.tvm.kernels import CPUKernels
    from specir.backends.tvm.op_table import kernel_table
    cache = KernelCache()
    ensure_compiled(plan_kernels(pipeline, cache.host, linear_schedule=schedule), cache)
    return kernel_table(CPUKernels(cache=cache), schedule)


def measure(engine: Engine, prompts, max_new: int) -> tuple[float, float, float, list]:
    """(decode tok/s, tau, prefill seconds per prompt, outputs). Decode time is generate's time
    less the target's prefill (the drafter's catch-up over the prompt stays in: it is part of
    every speculative first step)."""
    tokens, seconds, prefill, accepts, outs = 0, 0.0, 0.0, [], []
    original = engine._prefill
    spent = []

    def timed_prefill(requests):
        t0 = time.perf_counter()
        original(requests)
        spent.append(time.perf_counter() - t0)

    engine._prefill = timed_prefill
    try:
        for p in prompts:
            r = engine.generate([p], max_new)[0]
            tokens += len(r.tokens)
            seconds += r.seconds - spent[-1]
            prefill += spent[-1]
            accepts += r.accept_lengths
            outs.append(r.tokens)
    finally:
        engine._prefill = original
    return tokens / seconds, sum(accepts) / max(len(accepts), 1), prefill / len(prompts), outs


def bench_set(label: str, target: str, drafter: str, args, rows: list) -> None:
    print(f"[{label}] loading", file=sys.stderr, flush=True)
    pipes = make_pipelines(target, drafter)
    weights = Weights()
    folder = model_folder(pipes["chain"].model("target"))
    prompts = [encode(str(folder), r["prompt"])[-args.prompt_tokens:] for r in _workload(args.prompts)]
    engines = {}
    for name, p in pipes.items():
        w = weights.of(p)
        engines[(name, "torch")] = Engine(p, weights=w)
        engines[(name, "tvm")] = Engine(p, kernels=tvm_table(p, "tiled"), backend="tvm", weights=w)
    engines[("ar", "tvm naive")] = Engine(pipes["ar"], kernels=tvm_table(pipes["ar"], "naive"), backend="tvm",
                                          weights=weights.of(pipes["ar"]))
    for engine in engines.values():  # warm-up: first calls, kernel loading
        engine.generate([prompts[0][:4]], 2)
    results = {key: [] for key in engines}
    for rnd in range(args.rounds):
        for key, engine in engines.items():
            short = key[1] == "tvm naive"
            if short and rnd:
                continue  # one round of the slow naive schedule
            n_new = NAIVE_TOKENS if short else args.max_new_tokens
            use = [prompts[0][-NAIVE_PROMPT:]] if short else prompts
            t0 = time.perf_counter()
            tps, tau, prefill, outs = measure(engine, use, n_new)
            results[key].append((tps, tau, outs, prefill))
            print(f"[{label}] round {rnd + 1}: {key[0]:6} {key[1]:10} {tps:8.2f} tok/s  tau {tau:.2f}  prefill "
                  f"{prefill:.2f} s  ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    from specir.runtime.token_forcing import Reference, force
    reference = Reference.of_model(pipes["ar"].model("target"), "cpu", "ir")
    for (name, backend), runs in results.items():
        tps = statistics.median(r[0] for r in runs)
        outs = runs[0][2]
        used = [prompts[0][-NAIVE_PROMPT:]] if backend == "tvm naive" else prompts
        report = force(reference, used, outs)
        prefill = statistics.median(r[3] for r in runs)
        rows.append({"set": label, "pipeline": name, "backend": backend, "tps": tps, "tau": runs[0][1],
                     "prefill": prefill,
                     "forcing": f"{report.checked} / {report.mismatches} / {report.near_ties}",
                     "all": [r[0] for r in runs]})


BREAKDOWN_WIDTHS = (1, 5, 13)  # decode, chain verify (k = 4), tree verify (budget 12)


def op_breakdown(label: str, target: str, args, breakdowns: list) -> None:
    """Milliseconds per target forward, per op, for T new tokens after a prompt: where each backend
    spends a decode step and a verify (torch, tvm, and tvm naive at T = 1)."""
    from collections import defaultdict

    from specir.backends.reference.ops import KERNELS
    from specir.runtime.model_runner import ModelRunner

    pipes = make_pipelines(target, target)  # the drafter is never run here
    model = pipes["ar"].model("target")
    weights = Weights().of(pipes["ar"])["target"]
    torch.set_num_threads(int(os.environ["SPECIR_THREADS"]))
    tables = {"torch": dict(KERNELS), "tvm": tvm_table(pipes["tree"], "tiled"),
              "tvm naive": tvm_table(pipes["ar"], "naive")}
    prompt = 32
    result = {}
    for backend, table in tables.items():
        times = defaultdict(float)

        def timed(op, fn):
            def run(*a):
                t0 = time.perf_counter()
                out = fn(*a)
                times[op] += time.perf_counter() - t0
                return out
            return run

        runner = ModelRunner(model, weights, slots=1, max_seq=prompt + 32, kernels={op: timed(op, fn) for op, fn in
                                                                                      table.items()}, backend="bench")
        runner.forward([0], torch.arange(prompt)[None] % 100 + 5, torch.arange(prompt)[None])
        runner.cache.commit_prefix(0, prompt)
        for T in BREAKDOWN_WIDTHS:
            if backend == "tvm naive" and T > 1:
                continue
            samples = []
            for _ in range(args.breakdown_repeats):
                times.clear()
                t0 = time.perf_counter()
                runner.forward([0], torch.full((1, T), 7), torch.arange(prompt, prompt + T)[None])
                samples.append((time.perf_counter() - t0, dict(times)))
            samples.sort(key=lambda s: s[0])
            total, per_op = samples[len(samples) // 2]
            result[(backend, T)] = (total, per_op)
            print(f"[{label}] breakdown {backend:9} T={T:2}: {total * 1e3:8.1f} ms", file=sys.stderr, flush=True)
    weight_bytes = sum(t.numel() * t.element_size() for n, t in weights.items() if n != "model.embed_tokens.weight")
    breakdowns.append((label, result, weight_bytes))


def breakdown_report(breakdowns) -> list[str]:
    lines = []
    for label, result, weight_bytes in breakdowns:
        cols = [(b, T) for T in BREAKDOWN_WIDTHS for b in ("torch", "tvm", "tvm naive") if (b, T) in result]
        ops = sorted({op for _, per in result.values() for op in per}, key=lambda o: -result[cols[0]][1].get(o, 0))
        lines += ["", f"### Where a target forward spends its time: {label}", "",
                  f"Milliseconds per forward of T new tokens after a 32-token prompt (median of the repeats); weights "
                  f"read per forward (all but the embedding) {weight_bytes / 1e9:.2f} GB.", "",
                  "| op | " + " | ".join(f"{b} T={T}" for b, T in cols) + " |",
                  "|---|" + "---|" * len(cols)]
        for op in ops:
            lines.append(f"| {op} | " + " | ".join(f"{result[c][1].get(op, 0) * 1e3:.1f}" for c in cols) + " |")
        lines.append("| **forward** | " + " | ".join(f"**{result[c][0] * 1e3:.1f}**" for c in cols) + " |")
        lines.append("| weight GB/s | " + " | ".join(f"{weight_bytes / result[c][0] / 1e9:.1f}" for c in cols) + " |")
    return lines


def _workload(n: int) -> list[dict]:
    from specir.runtime.prompts import workload_records
    return workload_records("code-completion", n)


def write_report(rows, args, load_start, load_end, seconds) -> str:
    import tvm
    from specir.backends.tvm.host_target import host_cpu
    host = host_cpu()
    by = {(r["set"], r["pipeline"], r["backend"]): r for r in rows}
    lines = [
        "# CPU pipelines: TVM backend vs torch reference backend",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- command: `SPECIR_THREADS={os.environ['SPECIR_THREADS']} python {' '.join(sys.argv)}`",
        f"- cpu: {platform.machine()} ({host.mcpu}, {host.cores} cores, {', '.join(host.features)}); "
        f"torch {torch.__version__}, apache-tvm {tvm.__version__}; decoding threads: {os.environ['SPECIR_THREADS']} "
        f"(torch and TVM)",
        f"- machine load (1-min average) at start / end: {load_start:.1f} / {load_end:.1f} (shared 2-core VM; "
        f"rounds interleave the backends so both see the same load); wall time {seconds / 60:.1f} min",
        f"- batch 1, greedy, {args.prompts} prompts of the code-completion workload (last {args.prompt_tokens} tokens; "
        f"1B set: last {args.big_prompt_tokens}), {args.max_new_tokens} new tokens each (1B set: "
        f"{args.big_max_new_tokens}); median of {args.rounds} rounds (each round's figure in `rounds`); "
        f"`tvm naive`: one round, a {NAIVE_PROMPT}-token prompt, {NAIVE_TOKENS} new tokens",
        "- tok/s = new tokens / decode time (`Engine.generate` less the target's prefill, which is reported "
        "separately per prompt); speedup = pipeline tok/s / AR tok/s on the same "
        "backend; TVM/torch = tvm tok/s / torch tok/s of the same pipeline; forcing = token forcing of the "
        "first round's tokens against the stock target (IR graph, torch kernels): checked / mismatches / near-ties",
        "",
        "| model set | pipeline | backend | tok/s | rounds | tau | speedup vs AR | TVM / torch | prefill s | forcing |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ar = by.get((r["set"], "ar", r["backend"])) or by[(r["set"], "ar", "torch")]
        torch_row = by.get((r["set"], r["pipeline"], "torch"))
        ratio = f"{r['tps'] / torch_row['tps']:.2f}x" if torch_row and r["backend"] != "torch" else ""
        lines.append(f"| {r['set']} | {r['pipeline']} | {r['backend']} | {r['tps']:.2f} | "
                     f"{', '.join(f'{v:.2f}' for v in r['all'])} | {r['tau']:.2f} | {r['tps'] / ar['tps']:.2f}x | "
                     f"{ratio} | {r['prefill']:.2f} | {r['forcing']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--big-target", type=Path, help="an inflated 1B-class target folder")
    ap.add_argument("--big-drafter", type=Path, help="the drafter with the big target's vocabulary")
    ap.add_argument("--inflate-drafter", type=Path, help="write that drafter (from the shipped one) here and exit")
    ap.add_argument("--skip-zoo", action="store_true", help="only the big set")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=64, help="keep the last N tokens of each prompt")
    ap.add_argument("--big-prompt-tokens", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--big-max-new-tokens", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="markdown file to write")
    ap.add_argument("--breakdown-repeats", type=int, default=5, help="forwards per op-breakdown column")
    ap.add_argument("--no-breakdown", action="store_true")
    args = ap.parse_args()
    if args.inflate_drafter:
        from specir.zoo.inflate import inflate
        from specir.zoo.paths import zoo_model_dir
        inflate(zoo_model_dir("code-drafter"), drafter_shape(), args.inflate_drafter, device="cpu")
        return 0
    load_start, start = os.getloadavg()[0], time.perf_counter()
    rows: list = []
    breakdowns: list = []
    if not args.skip_zoo:
        bench_set(ZOO, "zoo:code-target", "zoo:code-drafter", args, rows)
        if not args.no_breakdown:
            op_breakdown("zoo target (hidden 256, 6 layers, vocab 4096)", "zoo:code-target", args, breakdowns)
    if args.big_target:
        big = argparse.Namespace(**{**vars(args), "max_new_tokens": args.big_max_new_tokens,
                                    "prompt_tokens": args.big_prompt_tokens})
        bench_set(BIG, str(args.big_target), str(args.big_drafter), big, rows)
        if not args.no_breakdown:
            op_breakdown("1B-class target (llama-1b-hd128: hidden 2048, 16 layers, vocab 128256)",
                         str(args.big_target), args, breakdowns)
    report = write_report(rows, args, load_start, os.getloadavg()[0], time.perf_counter() - start)
    report += "\n".join(breakdown_report(breakdowns)) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
