"""Serving metrics, rendered in the Prometheus text format (version 0.0.4).

Contract: one `Metrics` per server, updated by the scheduler thread (steps, tokens, finished
requests) and the HTTP handlers (responses by status), read by `render(gauges)`; every method
takes the lock. Exposed (all prefixed `specir_`):
- `requests_total{finish_reason}` (length, eos, stop, cancelled, error), `http_responses_total{path, status}`
- `prompt_tokens_total`, `generation_tokens_total`, `tokens_per_second` (generated, last 10 s)
- `tau` (tokens each request kept per step, since start), `request_steps_total`
- `draft_accepted_total{position}`, `draft_proposed_total{position}`, `draft_acceptance_rate{position}`
  (position i of the draft was accepted when a step kept more than i tokens; a request's last
  step is left out, where max_tokens, an end-of-sequence or a stop id may cut the kept tokens)
- `step_seconds` (histogram: one decode step of the batch), `prefill_seconds` (histogram: one
  prefill of the requests admitted together between two steps), `request_latency_seconds`,
  `time_to_first_token_seconds` (histograms), `engine_failures_total`
- gauges from the scheduler: `queue_depth`, `running_requests`, `max_batch_size`, `max_queue`
"""
from __future__ import annotations

import threading
import time
from collections import deque

STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
WINDOW_S = 10.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Histogram:
    def __init__(self, buckets):
        self.buckets, self.counts, self.sum, self.count = tuple(buckets), [0] * len(buckets), 0.0, 0

    def observe(self, value: float) -> None:
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str) -> list[str]:
        out = [f'{name}_bucket{{le="{edge}"}} {n}' for edge, n in zip(self.buckets, self.counts)]
        return out + [f'{name}_bucket{{le="+Inf"}} {self.count}', f"{name}_sum {self.sum:.6f}", f"{name}_count {self.count}"]


class Metrics:
    def __init__(self, draft_positions: int):
        self.lock = threading.Lock()
        self.positions = draft_positions
        self.finished: dict[str, int] = {}
        self.responses: dict[tuple[str, int], int] = {}
        self.prompt_tokens = self.generation_tokens = self.request_steps = self.engine_failures = 0
        self.accepted = [0] * draft_positions
        self.proposed = 0
        self.window: deque = deque()  # (time, tokens) of recent steps
        self.step_seconds = Histogram(STEP_BUCKETS)
        self.prefill_seconds = Histogram(STEP_BUCKETS)
        self.latency = Histogram(LATENCY_BUCKETS)
        self.ttft = Histogram(LATENCY_BUCKETS)

    # ---------------------------------------------------------------- updates
    def admitted(self, prompt_tokens: int) -> None:
        with self.lock:
            self.prompt_tokens += prompt_tokens

    def step(self, seconds: float, kept: list[tuple[int, bool]]) -> None:
        """One decode step: (tokens kept, request finished by it) per request in the batch."""
        now = time.monotonic()
        with self.lock:
            self.step_seconds.observe(seconds)
            tokens = sum(n for n, _ in kept)
            self.generation_tokens += tokens
            self.request_steps += len(kept)
            self.window.append((now, tokens))
            while self.window and self.window[0][0] < now - WINDOW_S:
                self.window.popleft()
            for n, last in kept:
                if last:
                    continue
                self.proposed += 1
                for i in range(min(n - 1, self.positions)):
                    self.accepted[i] += 1

    def prefill(self, seconds: float) -> None:
        """One prefill of the requests admitted together (first-time set-up excluded)."""
        with self.lock:
            self.prefill_seconds.observe(seconds)

    def first_token(self, seconds: float) -> None:
        with self.lock:
            self.ttft.observe(seconds)

    def finished_request(self, reason: str, seconds: float | None) -> None:
        with self.lock:
            self.finished[reason] = self.finished.get(reason, 0) + 1
            if seconds is not None:
                self.latency.observe(seconds)

    def engine_failure(self) -> None:
        with self.lock:
            self.engine_failures += 1

    def response(self, path: str, status: int) -> None:
        with self.lock:
            self.responses[(path, status)] = self.responses.get((path, status), 0) + 1

    # ---------------------------------------------------------------- reads
    def tokens_per_second(self) -> float:
        now = time.monotonic()
        with self.lock:
            recent = [(t, n) for t, n in self.window if t >= now - WINDOW_S]
        if not recent:
            return 0.0
        span = max(now - recent[0][0], 1.0)
        return sum(n for _, n in recent) / span

    def tau(self) -> float:
        with self.lock:
            return self.generation_tokens / self.request_steps if self.request_steps else 0.0

    def render(self, gauges: dict[str, float]) -> str:
        tps, tau = self.tokens_per_second(), self.tau()
        with self.lock:
            out: list[str] = []

            def family(name, kind, help_text, samples):
                out.append(f"# HELP specir_{name} {help_text}")
                out.append(f"# TYPE specir_{name} {kind}")
                out.extend(samples)

            reasons = dict.fromkeys(("length", "eos", "stop", "cancelled", "error"), 0) | self.finished
            family("requests_total", "counter", "Generation requests (choices) finished, by finish reason.",
                   [f'specir_requests_total{{finish_reason="{r}"}} {n}' for r, n in reasons.items()])
            family("http_responses_total", "counter", "HTTP responses, by path and status.",
                   [f'specir_http_responses_total{{path="{p}",status="{s}"}} {n}'
                    for (p, s), n in sorted(self.responses.items())])
            family("prompt_tokens_total", "counter", "Prompt tokens prefilled.",
                   [f"specir_prompt_tokens_total {self.prompt_tokens}"])
            family("generation_tokens_total", "counter", "Tokens generated.",
                   [f"specir_generation_tokens_total {self.generation_tokens}"])
            family("tokens_per_second", "gauge", f"Tokens generated per second over the last {WINDOW_S:g} s.",
                   [f"specir_tokens_per_second {tps:.3f}"])
            family("request_steps_total", "counter", "Decode steps summed over requests.",
                   [f"specir_request_steps_total {self.request_steps}"])
            family("tau", "gauge", "Mean tokens a request kept per decode step (accepted drafts + 1).",
                   [f"specir_tau {tau:.4f}"])
            positions = range(1, self.positions + 1)
            family("draft_accepted_total", "counter", "Steps whose draft was accepted at this position.",
                   [f'specir_draft_accepted_total{{position="{i}"}} {self.accepted[i - 1]}' for i in positions])
            family("draft_proposed_total", "counter", "Steps that proposed a draft at this position.",
                   [f'specir_draft_proposed_total{{position="{i}"}} {self.proposed}' for i in positions])
            family("draft_acceptance_rate", "gauge", "Fraction of steps whose draft was accepted at this position.",
                   [f'specir_draft_acceptance_rate{{position="{i}"}} '
                    f'{self.accepted[i - 1] / self.proposed if self.proposed else 0.0:.4f}' for i in positions])
            family("step_seconds", "histogram", "Seconds per decode step of the whole batch.",
                   self.step_seconds.lines("specir_step_seconds"))
            family("prefill_seconds", "histogram", "Seconds per prefill of the requests admitted between two steps.",
                   self.prefill_seconds.lines("specir_prefill_seconds"))
            family("request_latency_seconds", "histogram", "Seconds from arrival to the last token.",
                   self.latency.lines("specir_request_latency_seconds"))
            family("time_to_first_token_seconds", "histogram", "Seconds from arrival to the first token.",
                   self.ttft.lines("specir_time_to_first_token_seconds"))
            family("engine_failures_total", "counter", "Engine exceptions (prefill or step) the server recovered from.",
                   [f"specir_engine_failures_total {self.engine_failures}"])
            helps = {"queue_depth": "Requests waiting for a batch slot.",
                     "running_requests": "Requests decoding in the batch.",
                     "max_batch_size": "Batch slots (--max-batch-size).",
                     "max_queue": "Requests allowed to wait (--max-queue); more are answered 429."}
            for name, value in gauges.items():
                family(name, "gauge", helps.get(name, name), [f"specir_{name} {value:g}"])
        return "\n".join(out) + "\n"
