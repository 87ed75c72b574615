"""Continuous batching under Poisson arrivals: requests join and leave a running DecodeSession.

Contract: `arrivals(n, rate, seed)` -> n arrival times (seconds, exponential gaps of mean 1 / rate;
rate 0: every request at time 0). `serve(engine, prompts, times, max_new, capacity)` runs one
DecodeSession of `capacity` slots: before each step every request that has arrived (by the clock)
joins while a slot is free (first come, first served), then one step runs for the live ones;
finished requests leave. The clock is the time spent working (prefill and steps); when nothing is
live it jumps to the next arrival (idle time is not spent, so a run is as long as its work).
First-time work met on the way (kernel builds, CUDA-graph captures of a step shape the run had not
met: a batch-fusion step has a shape per forward size, so a batch that shrinks request by request
meets several) is the engine's setup, as in the static bench: it is kept off the clock and
reported apart (`setup_s`), as a server captures its shapes before it takes traffic.
Returns an `ArrivalRun`: every request's tokens in prompt order, the number of live requests at
each step, the busy seconds and the part of them spent in decode steps (the rest is prefill of
joining requests), per request its latency (finish - arrival) and steps, and the setup seconds
kept off the clock.
`compare(engine, ar_engine, prompts, rate, ...)` runs both engines on the same schedule and
returns an `ArrivalRow` (tok/s over busy time and its speedup, which counts the prefill of every
joining request, speculation or not; the decode speedup over decode steps alone, the static
bench's measure; tau, mean live batch, mean latency, and,
with `reference`, token-forcing mismatches of every request of the pipeline's run).
"""
from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, field


def arrivals(n: int, rate: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate) if rate > 0 else 0.0
    return out


@dataclass
class ArrivalRun:
    tokens: list[list[int]]
    live_per_step: list[int]
    busy_s: float
    latency_s: list[float]
    steps: list[int] = field(default_factory=list)
    setup_s: float = 0.0
    step_seconds: list[float] = field(default_factory=list)  # each decode step (DecodeSession.step_seconds)

    @property
    def decode_s(self) -> float:
        """Of busy_s, the decode steps; the rest is prefill of joining requests."""
        return sum(self.step_seconds)


def serve(engine, prompts: list[list[int]], times: list[float], max_new: int, capacity: int) -> ArrivalRun:
    decode = engine.open(capacity, engine.rows_needed(max(len(p) for p in prompts), max_new), sampling=False)
    order = sorted(range(len(prompts)), key=lambda i: times[i])
    waiting, clock, busy, setup = list(order), 0.0, 0.0, 0.0
    backend = getattr(engine, "backend", None)
    first_time = lambda: getattr(backend, "setup_s", 0.0)  # noqa: E731
    requests, finished_at, live_per_step = {}, {}, []
    while waiting or decode.active():
        if not decode.active() and waiting and times[waiting[0]] > clock:
            clock = times[waiting[0]]  # idle: jump to the next arrival
        joining = []
        while waiting and times[waiting[0]] <= clock and len(joining) < decode.free_slots():
            joining.append(waiting.pop(0))
        start, before = time.perf_counter(), first_time()
        if joining:
            added = decode.add_many([(prompts[i], max_new, 0.0, 0) for i in joining])
            requests.update(zip(joining, added))
        live_per_step.append(decode.active())
        decode.step()
        setup_now = first_time() - before
        spent = time.perf_counter() - start - setup_now
        setup += setup_now
        busy += spent
        clock += spent
        for i, r in requests.items():
            if r.done and i not in finished_at:
                finished_at[i] = clock
    n = len(prompts)
    return ArrivalRun([requests[i].generated for i in range(n)], live_per_step, busy,
                      [finished_at[i] - times[i] for i in range(n)], [len(requests[i].accept_lengths) for i in range(n)],
                      setup, list(decode.step_seconds))


@dataclass
class ArrivalRow:
    workload: str
    arrival_rate: float
    capacity: int
    requests: int
    tokens: int
    ar_tokens_per_s: float
    tokens_per_s: float
    speedup: float
    tau: float
    mean_live: float
    ar_mean_latency_s: float
    mean_latency_s: float
    agree_with_ar: float
    setup_s: float = 0.0  # first-time work (captures) of the pipeline's run, off its clock
    ar_busy_s: float = 0.0  # each run's busy seconds (tokens / tok/s) ...
    busy_s: float = 0.0
    ar_decode_s: float = 0.0  # ... and of them, in decode steps (the rest: prefill of joining requests)
    decode_s: float = 0.0
    mismatches: int | None = None
    near_ties: int | None = None

    @property
    def decode_speedup(self) -> float:
        """Decode tok/s over AR's, prefill excluded (what the static `specir bench` reports)."""
        if not self.decode_s or not self.ar_decode_s:
            return 0.0
        return (self.tokens / self.decode_s) / (self.ar_tokens_per_s * self.ar_busy_s / self.ar_decode_s)

    def as_dict(self) -> dict:
        return {**asdict(self), "decode_speedup": self.decode_speedup}


def compare(engine, ar_engine, prompts: list[list[int]], rate: float, capacity: int, max_new: int, *,
            workload: str = "prompts", seed: int = 0, reference=None) -> ArrivalRow:
    from .token_forcing import force
    times = arrivals(len(prompts), rate, seed)
    serve(ar_engine, prompts[:capacity], [0.0] * min(capacity, len(prompts)), min(max_new, 4), capacity)  # warm
    serve(engine, prompts[:capacity], [0.0] * min(capacity, len(prompts)), min(max_new, 4), capacity)
    ar = serve(ar_engine, prompts, times, max_new, capacity)
    run = serve(engine, prompts, times, max_new, capacity)
    tokens = sum(len(t) for t in run.tokens)
    ar_tps, tps = sum(len(t) for t in ar.tokens) / ar.busy_s, tokens / run.busy_s
    row = ArrivalRow(workload, rate, capacity, len(prompts), tokens, ar_tps, tps, tps / ar_tps,
                     tokens / max(1, sum(run.steps)), sum(run.live_per_step) / max(1, len(run.live_per_step)),
                     sum(ar.latency_s) / len(prompts), sum(run.latency_s) / len(prompts),
                     sum(a == b for a, b in zip(run.tokens, ar.tokens)) / len(prompts), run.setup_s,
                     ar.busy_s, run.busy_s, ar.decode_s, run.decode_s)
    if reference is not None:
        report = force(reference, prompts, run.tokens)
        row.mismatches, row.near_ties = report.mismatches, report.near_ties
    return row


def format_rows(rows: list[ArrivalRow]) -> str:
    checked = any(r.mismatches is not None for r in rows)
    lines = ["| workload | rate (req/s) | slots | requests | mean live | AR tok/s | tok/s | speedup | decode speedup | tau | "
             "AR latency s | latency s | = AR | setup s | prefill s (AR, pipeline) |" + (" mismatches |" if checked else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if checked else "")]
    for r in rows:
        lines.append(f"| {r.workload} | {r.arrival_rate:g} | {r.capacity} | {r.requests} | {r.mean_live:.2f} | "
                     f"{r.ar_tokens_per_s:.1f} | {r.tokens_per_s:.1f} | {r.speedup:.2f}x | {r.decode_speedup:.2f}x | {r.tau:.2f} | "
                     f"{r.ar_mean_latency_s:.3f} | {r.mean_latency_s:.3f} | {r.agree_with_ar:.0%} | {r.setup_s:.2f} | "
                     f"{r.ar_busy_s - r.ar_decode_s:.2f}, {r.busy_s - r.decode_s:.2f} |"
                     + (f" {r.mismatches} |" if checked else ""))
    return "\n".join(lines)
