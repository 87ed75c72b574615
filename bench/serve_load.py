"""Serving throughput: `specir serve` of the speculative pipeline against `specir serve` of the AR
pipeline (the same target, no draft) at several concurrencies, and against `specir bench` of the
same build at the same batch size.

    python bench/serve_load.py --out bench/results/serve-cpu-$(date +%F)
    python bench/serve_load.py --source /tmp/zoo8b/p.spec --target h200 --spec-passes batch-fusion --out $OUT/serve


What it does (every step through the CLI, as a user would):
1. `specir init > spec.spec` (the shipped pair, chain k=4; `--source SPEC`: that pipeline instead,
   e.g. the 8B-shape pair bench/h200_session.py inflates); the AR pipeline (runtime/baseline.py:
   `ar_pipeline`, verify.chain + accept.greedy on the stock target) printed to `ar.spec`;
   `specir compile ... --target T -o build-{spec,ar}/` (`--target`, default cpu); with `--spec-passes
   PIPELINE` the speculative build is `specir compile spec.spec --target T -p PIPELINE` (e.g. "ngram-draft{k=4},batch-fusion{
   shrink=true,target=cpu}"; default: no passes, the shipped chain k=4 pipeline as `specir init` writes it).
2. For each concurrency C: `specir serve build-X --max-batch-size C --max-model-len L` (default 2048) for both builds (two server
   processes on loopback), an untimed warm-up round (every prompt once, 8 tokens), then `--repeats` timed rounds alternating AR
   and spec (so that load on this shared machine hits both alike). A round: C client threads send
   `--requests-per-client` greedy completions each (default: together every prompt once, four
   times from 32 clients on), back to back (closed loop, non-streaming, the
   shipped workload prompts as token ids, max_tokens `--max-tokens`). Measured per round: tokens
   generated / wall seconds (first send to last answer), tokens per CPU-second of the server process
   (utime + stime from /proc: less sensitive to other processes on the machine), latency p50/p99.
3. `specir bench build-spec --batch-size 1,8,32 --max-new-tokens M --json`, `--repeats` times; and per
   concurrency C, `specir bench build-spec --prompts <one round's requests> --batch-size C --arrival-rate 0`
   (continuous batching without HTTP, its prefill seconds apart), once.
Reported: medians over rounds. Every request and answer stays on 127.0.0.1; rounds are bounded in
count and each request in time.
"""
from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

SPECIR = [sys.executable, "-m", "specir.cli.main"]
CLK = os.sysconf("SC_CLK_TCK")


def sh(argv, **kwargs) -> str:
    print("$", " ".join(str(a) for a in argv), file=sys.stderr, flush=True)
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True, **kwargs).stdout


def build(out: Path, spec_passes: str = "", source: str = "", target: str = "cpu") -> dict[str, Path]:
    from specir.ir.printer import print_pipeline
    from specir.load import load_pipeline
    from specir.runtime.baseline import ar_pipeline
    spec = Path(source) if source else out / "spec.spec"
    if not source:
        spec.write_text(sh(SPECIR + ["init"]))
    # the AR twin of a --source goes beside it (its relative model paths hold there), named for this script
    ar = spec.parent / f"{spec.stem}.serve_load-ar.spec" if source else out / "ar.spec"
    ar.write_text(print_pipeline(ar_pipeline(load_pipeline(spec))))
    builds = {}
    for name, path in (("ar", ar), ("spec", spec)):
        builds[name] = out / f"build-{name}"
        passes = ["-p", spec_passes] if name == "spec" and spec_passes else []
        sh(SPECIR + ["compile", path, "--target", target, "-o", builds[name]] + passes)
    return builds


def prompts(source: str = "", target: str = "cpu") -> list[list[int]]:
    from specir.runtime.prompts import to_ids, workload_records
    from specir.runtime.session import open_session
    folder = str(open_session(source or None, target).target_folder())
    return to_ids(workload_records(None, 8), folder, 4096)  # what `specir bench --limit 8` times


class Server:
    def __init__(self, build: Path, batch: int, log: Path, max_model_len: int = 0):
        self.log = open(log, "w+")
        context = ["--max-model-len", str(max_model_len)] if max_model_len else []
        self.proc = subprocess.Popen(SPECIR + ["serve", str(build), "--port", "0", "--max-batch-size", str(batch),
                                               "--max-queue", "256", *context], stdout=subprocess.DEVNULL,
                                     stderr=self.log)
        deadline = time.monotonic() + 600
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"specir serve exited: {Path(log).read_text()}")
            found = re.search(r"at http://127\.0\.0\.1:(\d+)/v1", Path(log).read_text())
            if found:
                self.port = int(found.group(1))
                return
            if time.monotonic() > deadline:
                raise RuntimeError("specir serve did not start in 600 s")
            time.sleep(0.2)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK

    def complete(self, ids: list[int], max_tokens: int) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        conn.request("POST", "/v1/completions", json.dumps({"prompt": ids, "max_tokens": max_tokens,
                                                            "temperature": 0}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.close()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {body}")
        return body["usage"]["completion_tokens"]

    def engine_seconds(self) -> dict:
        """The server's own step and prefill seconds so far (its /metrics histograms' sums and counts)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        values = dict(re.findall(r"^specir_((?:step|prefill)_seconds_(?:sum|count)) (\S+)$", text, re.M))
        return {"step_s": float(values.get("step_seconds_sum", 0)), "steps": int(values.get("step_seconds_count", 0)),
                "prefill_s": float(values.get("prefill_seconds_sum", 0)),
                "prefills": int(values.get("prefill_seconds_count", 0))}

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)


def default_per_client(clients: int, prompts: int) -> int:
    """Requests per client: together every prompt once (the multiset `specir bench` times, so
    serve and bench compare on the same prompts), four times from 32 clients on (a round's drain,
    where fewer than C requests are left, is then a small part of it)."""
    waves = 4 if clients >= 32 else 1
    return max(1, -(-waves * prompts // clients))


def round_(server: Server, pool: list[list[int]], clients: int, per_client: int, max_tokens: int) -> dict:
    latencies, tokens, errors = [], [0], []
    lock = threading.Lock()

    def client(c: int) -> None:
        for k in range(per_client):
            ids = pool[(c * per_client + k) % len(pool)]
            start = time.perf_counter()
            try:
                n = server.complete(ids, max_tokens)
            except Exception as exc:  # reported below
                errors.append(repr(exc))
                return
            with lock:
                latencies.append(time.perf_counter() - start)
                tokens[0] += n

    engine0, cpu0, t0 = server.engine_seconds(), server.cpu_seconds(), time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, server.cpu_seconds() - cpu0
    if errors:
        raise RuntimeError(errors[0])
    engine = {k: round(v - engine0[k], 3) for k, v in server.engine_seconds().items()}
    lat = sorted(latencies)
    return {"requests": len(lat), "tokens": tokens[0], "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), **engine,
            "tok_s": round(tokens[0] / wall, 2), "tok_per_cpu_s": round(tokens[0] / cpu, 2),
            "p50_s": round(statistics.median(lat), 3), "p99_s": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3)}


def median_of(rounds: list[dict]) -> dict:
    keys = ("tok_s", "tok_per_cpu_s", "p50_s", "p99_s", "wall_s", "step_s", "steps", "prefill_s", "prefills")
    return {k: round(statistics.median(r[k] for r in rounds), 3) for k in keys if all(k in r for r in rounds)}


def bench_rows(build: Path, sizes: list[int], max_tokens: int, repeats: int, out: Path) -> dict:
    """Per batch size: `specir bench` tok/s over all workloads (decoding; e2e with prefill), median of repeats."""
    per = {b: {"tok_s": [], "e2e_tok_s": [], "ar_tok_s": [], "ar_e2e_tok_s": []} for b in sizes}
    for r in range(repeats):
        data = json.loads(sh(SPECIR + ["bench", build, "--batch-size", ",".join(map(str, sizes)), "--limit", "8",
                                       "--max-new-tokens", str(max_tokens), "--json", "--out", out / f"bench-{r}"]))
        for b in sizes:
            rows = [row for row in data["rows"] if row["batch_size"] == b]
            tokens = sum(row["tokens"] for row in rows)
            for key, field in (("tok_s", "tokens_per_s"), ("e2e_tok_s", "e2e_tokens_per_s"),
                               ("ar_tok_s", "ar_tokens_per_s"), ("ar_e2e_tok_s", "ar_e2e_tokens_per_s")):
                per[b][key].append(tokens / sum(row["tokens"] / row[field] for row in rows))
    return {b: {k: round(statistics.median(v), 2) for k, v in d.items()} for b, d in per.items()}


def round_requests(pool: list[list[int]], clients: int, per_client: int) -> list[list[int]]:
    """The prompts one round sends (`round_`'s client c sends pool[c * per_client + k] as its k-th),
    wave by wave: every client's first request, then every client's second, ... (the order the server
    sees them first, so slots fill with the same prompts together)."""
    return [pool[(c * per_client + k) % len(pool)] for k in range(per_client) for c in range(clients)]


def bench_continuous(build: Path, requests: list[list[int]], clients: int, max_tokens: int, out: Path) -> dict:
    """`specir bench --arrival-rate 0` of `build` on one round's requests through `clients` slots:
    continuous batching as the server does it (a request joins when one leaves, its prefill between
    steps), without HTTP. tok/s over busy time for the pipeline and AR, and the prefill seconds of
    joining requests (busy minus decode-step seconds)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "requests.jsonl"
    path.write_text("".join(json.dumps({"prompt_ids": ids}) + "\n" for ids in requests))
    data = json.loads(sh(SPECIR + ["bench", build, "--prompts", path, "--limit", str(len(requests)),
                                   "--batch-size", str(clients), "--arrival-rate", "0",
                                   "--max-new-tokens", str(max_tokens), "--json", "--out", out]))
    row = data["rows"][0]
    return {"tok_s": round(row["tokens_per_s"], 2), "ar_tok_s": round(row["ar_tokens_per_s"], 2),
            "prefill_s": round(row["busy_s"] - row["decode_s"], 3), "busy_s": round(row["busy_s"], 3),
            "ar_prefill_s": round(row["ar_busy_s"] - row["ar_decode_s"], 3), "ar_busy_s": round(row["ar_busy_s"], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests-per-client", type=int, default=0, help="default: every prompt once in all (32 at concurrency 1, 4 at 8), 4 passes at 32 and more")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-model-len", type=int, default=2048,
                    help="each server's --max-model-len (default 2048: both servers' caches, 2 lanes x "
                         "batch x context, fit one GPU together at the 8B shape; 0: the server's default)")
    ap.add_argument("--source", default="", help="the pipeline to serve (a .spec); default: `specir init`'s shipped pair")
    ap.add_argument("--target", default="cpu", help="the compile target of both builds (cpu, h200, ...)")
    ap.add_argument("--spec-passes", default="", help="passes for the speculative build (specir compile -p); "
                    "default: none (the shipped chain k=4 pipeline)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = [int(c) for c in args.concurrency.split(",")]
    load_before = os.getloadavg()
    builds = build(out, args.spec_passes, args.source, args.target)
    pool = prompts(args.source, args.target)
    results = {"serve": {}, "bench": {}, "bench_continuous": {}}
    per_clients = {c: args.requests_per_client or default_per_client(c, len(pool)) for c in sizes}
    for c in sizes:
        per_client = per_clients[c]
        servers = {name: Server(builds[name], c, out / f"serve-{name}-c{c}.log", args.max_model_len)
                   for name in ("ar", "spec")}
        try:
            for s in servers.values():  # warm-up: every prompt once (its prefill shape), 8 tokens each
                round_(s, pool, c, max(1, -(-len(pool) // c)), 8)
            rounds = {"ar": [], "spec": []}
            for _ in range(args.repeats):
                for name in ("ar", "spec"):
                    rounds[name].append(round_(servers[name], pool, c, per_client, args.max_tokens))
                    print(c, name, rounds[name][-1], file=sys.stderr, flush=True)
        finally:
            for s in servers.values():
                s.stop()
        results["serve"][c] = {name: {"median": median_of(r), "rounds": r} for name, r in rounds.items()}
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")  # so far (a killed run keeps it)
    results["bench"] = bench_rows(builds["spec"], sizes, args.max_tokens, args.repeats, out)
    for c in sizes:
        results["bench_continuous"][c] = bench_continuous(builds["spec"], round_requests(pool, c, per_clients[c]), c,
                                                          args.max_tokens, out / f"bench-continuous-c{c}")
    results["meta"] = {
        "date": datetime.date.today().isoformat(), "machine": f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores" + _gpu(args.target), "load_average_before": load_before, "load_average_after": os.getloadavg(),
        "command": "python bench/serve_load.py " + shlex.join(sys.argv[1:]), "max_tokens": args.max_tokens,
        "target": args.target, "source": args.source or "specir init (the shipped pair)",
        "prompts": len(pool), "repeats": args.repeats, "max_model_len": args.max_model_len,
        "spec_passes": args.spec_passes}
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "README.md").write_text(report(results))
    print(report(results))
    return 0


def _gpu(target: str) -> str:
    """", <the GPU's name>" for a GPU target ("" on the CPU)."""
    if target == "cpu":
        return ""
    import torch
    return f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""


def spec_desc(meta: dict) -> str:
    """The speculative build, as the report names it."""
    passes = meta.get("spec_passes")
    source = meta.get("source") or "specir init (the shipped pair)"
    named = "`specir init`" if source.startswith("specir init") else f"`{source}`"
    if not passes:
        return "chain k=4" if named == "`specir init`" else f"{named} as written"
    return f"{named} compiled with -p \"{passes}\""


def report(res: dict) -> str:
    m = res["meta"]
    lines = [f"# specir serve (--target {m.get('target', 'cpu')}): speculative vs AR, and vs specir bench ({m['date']})",
             "",
             f"Command: `{m['command']}`  ", f"Machine: {m['machine']}; load average before "
             f"{', '.join(f'{x:.1f}' for x in m['load_average_before'])}, after "
             f"{', '.join(f'{x:.1f}' for x in m['load_average_after'])} (a shared machine: other jobs ran during the "
             f"measurement, so wall-clock figures are noisy; tokens per CPU-second of the server process are less so). "
             f"Medians of {m['repeats']} rounds; the pipeline ({spec_desc(m)}) and its AR pipeline, greedy, "
             f"{m['prompts']} shipped workload prompts, max_tokens {m['max_tokens']}.", "",
             "| concurrency | AR tok/s | spec tok/s | spec/AR | AR tok/CPU-s | spec tok/CPU-s | spec/AR (CPU) | "
             "spec p50 / p99 s | bench tok/s (decode) | bench tok/s (e2e) | serve / bench e2e |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c, row in res["serve"].items():
        ar, sp = row["ar"]["median"], row["spec"]["median"]
        b = res["bench"].get(c) or res["bench"].get(str(c)) or {}
        lines.append(f"| {c} | {ar['tok_s']:.1f} | {sp['tok_s']:.1f} | {sp['tok_s'] / ar['tok_s']:.2f}x | "
                     f"{ar['tok_per_cpu_s']:.1f} | {sp['tok_per_cpu_s']:.1f} | "
                     f"{sp['tok_per_cpu_s'] / ar['tok_per_cpu_s']:.2f}x | {sp['p50_s']:.2f} / {sp['p99_s']:.2f} | "
                     f"{b.get('tok_s', float('nan')):.1f} | {b.get('e2e_tok_s', float('nan')):.1f} | "
                     f"{sp['tok_s'] / b['e2e_tok_s'] if b.get('e2e_tok_s') else float('nan'):.2f} |")
    lines += ["", "serve: closed-loop clients over HTTP (prefill, HTTP and JSON included), continuous batching "
              "with --max-batch-size = concurrency. bench: `specir bench` of the same build at batch size = "
              "concurrency (decode: prefill excluded; e2e: prefill included; static batches).", ""]
    split = [(c, row) for c, row in res["serve"].items() if "step_s" in row["spec"]["median"]]
    if split:
        lines += ["Where a round's wall seconds went in the server (its /metrics: decode steps, prefills of "
                  "admitted requests; other: the loop between them, HTTP, JSON and clients' round trips, "
                  "idle slots):", "",
                  "| concurrency | wall s (spec; AR) | steps s, mean ms | prefill s, count | other s |",
                  "|---:|---:|---:|---:|---:|"]
        for c, row in split:
            cells = []
            for name in ("spec", "ar"):
                m = row[name]["median"]
                cells.append((m["wall_s"], f"{m['step_s']:.2f}, {1000 * m['step_s'] / max(m['steps'], 1):.1f}",
                              f"{m['prefill_s']:.2f}, {m['prefills']:.0f}",
                              m["wall_s"] - m["step_s"] - m["prefill_s"]))
            (ws, ss, ps, os_), (wa, sa, pa, oa) = cells
            lines.append(f"| {c} | {ws:.2f}; {wa:.2f} | {ss}; {sa} | {ps}; {pa} | {os_:.2f}; {oa:.2f} |")
        lines.append("")
    continuous = res.get("bench_continuous") or {}
    if continuous:
        lines += ["Against `specir bench --arrival-rate 0` on one round's requests through as many slots (continuous "
                  "batching without HTTP: a request joins when one leaves; tok/s over busy time; prefill: the busy "
                  "seconds outside decode steps, i.e. joining requests' prefills):", "",
                  "| concurrency | bench continuous tok/s (spec / AR) | prefill s of busy s (spec; AR) | "
                  "serve / bench continuous (spec; AR) |", "|---:|---:|---:|---:|"]
        for c, row in res["serve"].items():
            cb = continuous.get(c) or continuous.get(str(c))
            if not cb:
                continue
            ar, sp = row["ar"]["median"], row["spec"]["median"]
            lines.append(f"| {c} | {cb['tok_s']:.1f} / {cb['ar_tok_s']:.1f} | {cb['prefill_s']:.2f} of "
                         f"{cb['busy_s']:.2f}; {cb['ar_prefill_s']:.2f} of {cb['ar_busy_s']:.2f} | "
                         f"{sp['tok_s'] / cb['tok_s']:.2f}; {ar['tok_s'] / cb['ar_tok_s']:.2f} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
