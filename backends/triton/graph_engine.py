"""Greedy decoding with the whole step on the device, captured as CUDA graphs.

Contract: `GraphEngine(pipeline, schedule, models, device).generate(prompts, max_new_tokens)`
returns what specir.runtime.engine.Engine returns for the same pipeline at temperature 0: per
request the emitted tokens (the target's greedy path, cut at max_new_tokens and after an eos
token) and the tokens emitted per step. Prefill (all prompt tokens but the last into the target
cache, and into the drafter's) runs eagerly; then each step is one replay of a captured graph
(device_step.DeviceStep) and one device-to-host copy of the emitted tokens. n-gram proposals
are looked up on the host (specir.runtime.drafting.draft_ngram) and copied in before the replay;
a step where no request has a proposal replays the one-token verify graph.

Captured steps are kept per (batch size, cache rows) and reused by later calls with room
enough. On a CPU device (Triton's interpreter) the same step runs eagerly, without graphs.
"""
from __future__ import annotations

import time

import torch

from specir.runtime.drafting import draft_ngram
from specir.runtime.engine import Request, Result

from .compiled_model import concrete_device
from .device_step import DeviceStep, StepState
from .forward import ForwardInputs
from .schedule import Schedule

ROW_QUANTUM = 256  # cache rows are rounded up to this so that later calls reuse captured steps
COUNTER_SLOTS = 1 << 20  # split-K counters reserved before any capture (see GraphEngine.__init__)


class _Session:
    """Caches, device state and captured steps for one (B, max_seq)."""

    def __init__(self, engine: "GraphEngine", B: int, max_seq: int):
        s, dev = engine.schedule, engine.device
        self.B, self.max_seq = B, max_seq
        self.t_cache = engine.target.new_cache(B, max_seq)
        self.d_cache = engine.drafter.new_cache(B, max_seq) if engine.drafter is not None else None
        self.steps: dict[int, DeviceStep] = {}
        self.replays: dict[int, callable] = {}
        self.state = StepState(B, s.feed_width, dev)
        for width in [s.verify_width] + ([1] if s.kind == "ngram" else []):
            step = DeviceStep(s, engine.target, engine.drafter, self.t_cache, self.d_cache, self.state, dev,
                              verify_width=width)
            self.steps[width] = step
            self.replays[width] = engine.capture(step.run)


class GraphEngine:
    def __init__(self, pipeline, schedule: Schedule, models: dict, device, eos=(), max_position: int = 1 << 30):
        self.pipeline, self.schedule, self.device = pipeline, schedule, concrete_device(device)
        self.target = models[schedule.target]
        self.drafter = models[schedule.drafter] if schedule.drafter else None
        self.eos, self.max_position = set(eos), max_position
        self.use_graphs = self.device.type == "cuda"
        self.pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        if self.use_graphs:
            # The split-K arrival counters of the linear kernels live in one buffer per device that
            # grows on demand; a captured graph keeps its address, so grow it once, now, past what
            # any later call (prefill included) asks for.
            from .kernels.linear import _counter_buffer
            self._counters = _counter_buffer(self.device, COUNTER_SLOTS)
        self.sessions: dict[int, _Session] = {}
        self.captures = 0
        self.timings: dict[str, float] = {}  # prefill / decode seconds of the last generate

    # ------------------------------------------------------------------ graphs
    def capture(self, fn):
        """A replay function for `fn` (a CUDA graph on a GPU; `fn` itself on a CPU)."""
        if not self.use_graphs:
            return fn
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            fn()  # compiles the Triton kernels and allocates lazily created buffers
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            fn()
        self.captures += 1
        return graph.replay

    def session(self, B: int, rows: int) -> _Session:
        sess = self.sessions.get(B)
        if sess is None or sess.max_seq < rows:
            if sess is not None:
                del self.sessions[B]
                del sess
                if self.use_graphs:
                    torch.cuda.empty_cache()
            max_seq = -(-rows // ROW_QUANTUM) * ROW_QUANTUM
            sess = _Session(self, B, max_seq)
            self.sessions[B] = sess
        return sess

    # ------------------------------------------------------------------ decode
    def rows_needed(self, prompts, max_new: int) -> int:
        s = self.schedule
        width = max(s.verify_width, s.drafter_rows if self.drafter is not None else 0)
        return max(len(p) for p in prompts) + max_new + 2 * width + 8

    def generate(self, prompts: list[list[int]], max_new_tokens: int, on_step=None) -> list[Result]:
        B = len(prompts)
        start = time.perf_counter()
        sess = self.session(B, self.rows_needed(prompts, max_new_tokens))
        m = sess.state
        m.reset()
        self._prefill(sess, prompts)
        if self.use_graphs:
            torch.cuda.synchronize(self.device)
        decode_start = time.perf_counter()
        requests = [Request(list(p), max_new_tokens, b, tokens=list(p)) for b, p in enumerate(prompts)]
        m.pending.copy_(torch.tensor([p[-1] for p in prompts], dtype=torch.long))
        m.active.fill_(1)
        if self.drafter is not None:
            m.feed[:, 0] = m.pending
            m.n_feed.fill_(1)
        s = self.schedule
        while True:
            active = [r for r in requests if not r.done]
            if not active:
                break
            width = s.verify_width
            if s.kind == "ngram":
                width = self._ngram_drafts(sess, requests)
            sess.replays[width]()
            data = sess.steps[width].readback.cpu()
            finished = self._commit(requests, data, width)
            if finished:
                m.active.copy_(torch.tensor([0 if r.done else 1 for r in requests], dtype=torch.int32))
            if on_step:
                on_step(requests)
        if self.use_graphs:
            torch.cuda.synchronize(self.device)
        end = time.perf_counter()
        self.timings = {"prefill_s": decode_start - start, "decode_s": end - decode_start}
        return [Result(r.generated, r.accept_lengths, end - start) for r in requests]

    def _prefill(self, sess: _Session, prompts) -> None:
        feeds = [p[:-1] for p in prompts]
        T = max(len(f) for f in feeds)
        lens = torch.tensor([len(f) for f in feeds], dtype=torch.int32)
        if T > 0:
            B = len(prompts)
            inputs = ForwardInputs.allocate(B, T, self.device)
            for b, f in enumerate(feeds):
                inputs.ids[b, :len(f)] = torch.tensor(f, dtype=torch.long)
            inputs.pos.copy_(torch.arange(T)[None, :].expand(B, T))
            models = [(self.target, sess.t_cache)] + ([(self.drafter, sess.d_cache)] if self.drafter else [])
            for model, cache in models:
                model.forward(cache, inputs).run()
        sess.state.t_lens.copy_(lens)
        sess.state.d_lens.copy_(lens)

    def _ngram_drafts(self, sess: _Session, requests) -> int:
        s = self.schedule
        drafts = draft_ngram(requests, s.k, s.max_ngram, s.min_ngram).tokens
        live = [d for r, d in zip(requests, drafts) if not r.done]
        if not any(live):
            return 1
        ids = torch.full((len(requests), s.k), -1, dtype=torch.long)
        for b, (r, d) in enumerate(zip(requests, drafts)):
            if d and not r.done:
                ids[b, :len(d)] = torch.tensor(d, dtype=torch.long)
        sess.steps[s.verify_width].v_in.ids[:, 1:].copy_(ids)
        return s.verify_width

    def _commit(self, requests, data: torch.Tensor, width: int) -> bool:
        """Append each active request's emitted tokens (as Engine.commit does); True when one finished."""
        finished = False
        rows = data.tolist()
        for b, r in enumerate(requests):
            if r.done:
                continue
            r.append(rows[b][:rows[b][width]], self.eos)
            finished |= r.done
        return finished
