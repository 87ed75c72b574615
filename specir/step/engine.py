"""The warm decode engine: prefill, then the IR's step until every request is done.

Contract: `StepEngine(pipeline, backend, weights=None, base=None, build=None)` compiles every model
the step uses once (the backend's executors: weights, kernels) and lowers the step once
(program.py). Sessions (per batch size B and sampling mode: the caches, the step context, static
buffers and captured graphs) are built on first use and kept: later prompts, batches and
`generate` calls reuse them (a session is replaced only when a call needs more cache rows).
- `generate(prompts, max_new_tokens, *, temperature, seed, on_step) -> [Result]`: every request's
  emitted tokens (cut at max_new_tokens and after an end-of-sequence token) and the tokens
  emitted per step; `timings` then holds prefill_s, decode_s, `steps` (decode steps run) and `setup_s` the engine's
  one-time cost (compiling, loading, packing, and the backend's warm-ups and graph captures,
  `StepBackend.first_time`) so far; warm-ups and captures met during the call count in setup_s,
  not in prefill_s or decode_s (a kernel compiled by an eager launch outside them still counts
  where it runs: `specir run` and `specir bench` warm up first for that).
- `open(capacity, max_rows, sampling)` -> DecodeSession: continuous batching, requests added and
  finishing between steps (`add`, `step`, `cancel`; `forget_finished` for a long-lived session).
Invariant per request: the verifier's cache has committed every token but the pending one; a
drafter has committed every token up to the pending one after its catch-up.
"""
from __future__ import annotations

import time

import torch

from ..declared_target import read as read_declared
from ..errors import SpecirError
from ..runtime.recurrent_commit import commit_recurrent, reset_recurrent
from ..runtime.recurrent_state import RING_NODES_MAX
from ..runtime.weights import load_weights
from .context import StepContext
from .forward_inputs import ForwardInputs
from . import prefill_shapes
from .program import StepProgram
from .requests import Request, Result

ROW_QUANTUM = 256  # cache rows are rounded up to this so that later calls reuse a session


class StepEngine:
    def __init__(self, pipeline, backend, *, weights: dict | None = None, base=None, build=None):
        if pipeline.step is None:
            raise SpecirError("the pipeline has no step", hint="add step(%ctx: context) { ... }")
        start = time.perf_counter()
        self.pipeline, self.backend, self.device = pipeline, backend, backend.device
        self.program = StepProgram(pipeline, backend)
        self.info = self.program.info
        self.roles: list[tuple[str, str]] = []
        for op in pipeline.step.ops:
            iface = self.info.interfaces(op)
            for symbol in op.symbols:
                role = "draft" if "draft" in iface.effects else "verify" if "verify" in iface.effects else None
                if role is None:
                    raise SpecirError(f"step op {op.name} uses model {symbol} but declares neither a draft nor a "
                                      f"verify effect", location=op.loc,
                                      hint="its StepInterfaces.effects must say how it uses the model")
                if role == "draft" and (symbol[1:], role) in self.roles:
                    raise SpecirError(f"model {symbol} drafts in two step ops; a drafter's cache catches up once "
                                      f"per step, so one op per drafter", location=op.loc,
                                      hint="give the second op another model (two-level-verify{kind=model,"
                                           "model=drafter} needs ngram-draft after it)")
                if (symbol[1:], role) not in self.roles:
                    self.roles.append((symbol[1:], role))
        verifiers = [name for name, role in self.roles if role == "verify"]
        if not verifiers:
            raise SpecirError("the step verifies nothing", hint="a step needs a verify op on the target")
        declared = read_declared(pipeline)
        self.target = declared.model if declared else verifiers[-1]
        target = pipeline.model(self.target)
        self.eos = set(target.attrs.get("eos", ()))
        self.max_position = int(target.attrs.get("max_position", 1 << 30))
        self.executors = {}
        for name in dict.fromkeys(n for n, _ in self.roles):
            model = pipeline.model(name)
            given = (weights or {}).get(name)
            self.executors[name] = backend.compiled(
                model, lambda model=model, given=given: given if given is not None
                else load_weights(model, self.device, base, build=build))
        for name, executor in self.executors.items():
            if getattr(executor, "state_nodes", 1) is None:  # recurrent state ring: a step's nodes, or a prefill chunk
                executor.state_nodes = self.info.ring_nodes(pipeline.model(name))
        self.sessions: dict[tuple[int, bool], Session] = {}
        self.closed = False
        self.setup_s = time.perf_counter() - start
        self.timings: dict[str, float] = {}

    def close(self) -> None:
        """Drop every session (caches, captured graphs, their pools) and the models' executors
        (weights, also the backend's references), so the process can give their device memory back
        (specir.device_memory.release). A closed engine decodes nothing (SpecirError)."""
        for sess in self.sessions.values():
            sess.close()
        self.sessions.clear()
        self.executors.clear()
        self.backend.release()
        self.closed = True

    # ------------------------------------------------------------------ sizing
    def rows_needed(self, longest_prompt: int, max_new: int) -> int:
        scratch = max(self.info.scratch_rows().values(), default=0)
        return longest_prompt + max_new + scratch + self.info.emit_width + 8

    def check_lengths(self, prompts, max_new: int) -> None:
        if max_new < 1:
            raise SpecirError("max-new-tokens must be at least 1", hint="e.g. --max-new-tokens 64")
        for i, p in enumerate(prompts):
            if not p:
                raise SpecirError(f"prompt {i} is empty", hint="give at least one token (--prompt TEXT)")
            if len(p) >= self.max_position:
                raise SpecirError(f"prompt {i} has {len(p)} tokens; the target's context is {self.max_position}",
                                  hint="shorten the prompt")
            if len(p) + max_new > self.max_position:
                raise SpecirError(f"prompt {i} ({len(p)} tokens) + max-new-tokens ({max_new}) exceeds the "
                                  f"target's context of {self.max_position}",
                                  hint=f"use --max-new-tokens {max(self.max_position - len(p), 1)} or less")

    def session(self, B: int, rows: int, sampling: bool) -> "Session":
        if self.closed:
            raise SpecirError("this engine was closed", hint="make a new engine (specir.runtime.session.make_engine)")
        key = (B, sampling)
        sess = self.sessions.get(key)
        if sess is None or sess.max_seq < rows:
            if sess is not None:
                del self.sessions[key]
                sess.close()
            start = time.perf_counter()
            sess = Session(self, B, -(-rows // ROW_QUANTUM) * ROW_QUANTUM, sampling)
            self.setup_s += time.perf_counter() - start
            self.sessions[key] = sess
        return sess

    def open(self, capacity: int, max_rows: int, sampling: bool = True) -> "DecodeSession":
        sess = self.session(capacity, max_rows, sampling)
        sess.reset()
        return DecodeSession(sess)

    # ------------------------------------------------------------------ generate
    def generate(self, prompts: list[list[int]], max_new_tokens: int = 64, *, temperature: float = 0.0,
                 seed: int = 0, on_step=None) -> list[Result]:
        self.check_lengths(prompts, max_new_tokens)
        sampling = temperature > 0
        rows = self.rows_needed(max(len(p) for p in prompts), max_new_tokens)
        decode = self.open(len(prompts), rows, sampling)
        first_time = self.backend.setup_s
        start = time.perf_counter()
        decode.add_many([(list(p), max_new_tokens, temperature, request_seed(seed, i)) for i, p in enumerate(prompts)])
        self.sync()
        decode_start = time.perf_counter()
        in_prefill = self.backend.setup_s - first_time
        while decode.active():
            decode.step()
            if on_step:
                on_step(decode.requests)
        self.sync()
        end = time.perf_counter()
        in_decode = self.backend.setup_s - first_time - in_prefill
        self.setup_s += in_prefill + in_decode
        self.timings = {"prefill_s": decode_start - start - in_prefill, "decode_s": end - decode_start - in_decode,
                        "setup_s": self.setup_s, "steps": len(decode.step_seconds)}
        return [Result(r.generated, r.accept_lengths, end - start, r.finish_reason) for r in decode.requests]

    def sync(self) -> None:
        """Wait for the device work launched so far (nothing on a CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def request_seed(seed: int, index: int) -> int:
    """The random stream of request `index` of a generate call seeded `seed` (distinct per request)."""
    return (int(seed) * 0x9E3779B1 + index * 0x85EBCA77 + 1) & 0x7FFFFFFF


RECURRENT_PREFILL_CHUNK = RING_NODES_MAX  # tokens per prefill forward of a model with recurrent state, at most


class Session:
    """The caches, step context, static buffers and captured graphs of one (B, sampling) shape."""

    def __init__(self, engine: StepEngine, B: int, max_seq: int, sampling: bool):
        self.engine, self.B, self.max_seq, self.sampling = engine, B, max_seq, sampling
        self.ctx = StepContext(B, max_seq, engine.device, engine.backend, sampling=sampling,
                               emit_width=engine.info.emit_width)
        self.ctx.info = engine.info  # the step's facts, for ops' setup (e.g. a packed verify's row bounds)
        for name, role in engine.roles:
            self.ctx.add_model(name, role, engine.executors[name])
        for op in engine.pipeline.step.ops:
            setup = engine.info.interfaces(op).setup
            if setup is not None:
                setup(self.ctx, op)
        self.static: dict = {}
        self.captures: dict = {}
        self.warmed: set = set()
        self.pool = engine.backend.graph_pool() if engine.backend.captures else None
        self.prefills: dict = {}

    def reset(self) -> None:
        self.ctx.active.zero_()
        self.ctx.requests = [None] * self.B

    def close(self) -> None:
        self.captures.clear()
        self.static.clear()
        self.prefills.clear()
        self.ctx.release()

    def prefill(self, entries: list[tuple[int, list[int]]]) -> None:
        """Commit every prompt token but the last into every model's cache, in the given slots (caches
        only: a prefill computes no logits). On a backend that captures (its kernels compile on first
        use), prompts run in few shapes (prefill_shapes: rows and tokens per forward from fixed
        buckets, long prompts chunk by chunk) and the first prefill of each shape runs once more before it,
        through the backend's `first_time`, and is captured as a CUDA graph there: the kernels it
        compiles and the capture are set-up (`setup_s`), not prefill time (the warm-up writes the
        same cache rows the real one then rewrites), and every prefill of that shape replays the
        graph (StepContext.launch_timed: a prefill is a few hundred launches, which cost more eagerly
        than their work at short prompts); elsewhere nothing compiles there, and a prefill runs once,
        eagerly. A model with recurrent state prefills in chunks of
        RECURRENT_PREFILL_CHUNK tokens at most (and no more than its state ring holds), each
        committed before the next (the ring then holds a step's nodes, not a prompt's). A drafter
        whose every draft op is off at the live count the new requests make (`off_at`) is not
        prefilled: it resyncs on the whole history the first step it drafts again."""
        ctx, dev = self.ctx, self.engine.device
        feeds = [p[:-1] for _, p in entries]
        longest = max(len(f) for f in feeds)
        slots = torch.tensor([s for s, _ in entries], dtype=torch.int32, device=dev)
        for state in ctx.models.values():
            reset_recurrent(state.cache, slots)  # a reused slot's recurrent state starts afresh
        idle = self._idle_drafters(int(ctx.active.sum()) + len(entries))
        if longest > 0:
            for state in ctx.models.values():
                if (state.name, state.role) not in idle:  # (an idle drafter catches up when it resumes)
                    self._prefill_model(state, feeds, slots)
        lens = torch.tensor([len(f) for f in feeds], dtype=torch.int32, device=dev)
        pending = torch.tensor([p[-1] for _, p in entries], dtype=torch.long, device=dev)
        index = slots.long()
        for state in ctx.models.values():
            state.lens[index] = 0 if (state.name, state.role) in idle else lens  # (recurrent: chunk by chunk above)
            if state.role == "draft":
                state.feed[index, 0] = pending
                state.n_feed[index] = 1
        ctx.pending[index] = pending
        ctx.counter[index] = 0
        ctx.active[index] = 1


    def _prefill_model(self, state, feeds: list[list[int]], slots: torch.Tensor) -> None:
        """One model's share of `prefill`: its forwards over the feeds, chunk by chunk (prefill_shapes)."""
        ctx, dev, backend = self.ctx, self.engine.device, self.engine.backend
        recurrent = getattr(state.cache, "recurrent", None) is not None
        n = len(feeds)
        bucketed = self._bucketed(state)
        rows = prefill_shapes.rows(n, self.B) if bucketed else n  # pad rows repeat row 0
        # a chunk's every node must stay in the ring until its commit: ragged prompts end mid-chunk
        limit = min(RECURRENT_PREFILL_CHUNK, state.cache.recurrent.nodes) if recurrent else None
        plan = prefill_shapes.chunks(max(len(f) for f in feeds), rows_=rows, max_seq=self.max_seq,
                                     bucketed=bucketed, quantum=backend.prefill_quantum, limit=limit)
        width = plan[-1][0] + plan[-1][1]
        ids = torch.zeros(rows, width, dtype=torch.long)
        for b, f in enumerate(feeds):
            ids[b, :len(f)] = torch.tensor(f, dtype=torch.long)
        ids[n:] = ids[0]
        fed = torch.tensor([len(f) for f in feeds] + [len(feeds[0])] * (rows - n), dtype=torch.long, device=dev)
        row_slots = torch.cat([slots, slots[:1].expand(rows - n)])
        for begin, size in plan:
            inputs, forward = self._prefill_forward(state, rows, size)
            inputs.ids.copy_(ids[:, begin:begin + size])
            inputs.pos.copy_(torch.arange(begin, begin + size)[None, :].expand(rows, size))
            inputs.slots.copy_(row_slots)
            inputs.lens.copy_(fed.clamp(max=begin))
            ctx.launch_timed(state, ("prefill", rows, size), forward.run, capture=bucketed)  # a graph per shape
            if recurrent:
                kept = (fed - begin).clamp(0, size)
                commit_recurrent(state.cache, kept - 1, kept, slots=slots.long())

    def _bucketed(self, state) -> bool:
        """Whether `state`'s prefills run in bucketed shapes, each captured once: where its forwards are
        captured and its cache is attention only (recurrent rows each commit their own ring nodes: no
        pad rows, run eagerly; a length-dependent rope prefills a prompt in one forward)."""
        return self.ctx.captures_forwards(state) and getattr(state.cache, "recurrent", None) is None

    def _prefill_forward(self, state, rows: int, size: int):
        """(inputs, forward) of `state`'s cache-only forward over rows x size tokens, built once."""
        key = (state.name, state.role, rows, size)
        if key not in self.prefills:
            inputs = ForwardInputs.allocate(rows, size, self.engine.device, slots=True)
            self.prefills[key] = (inputs, state.executor.forward_on(state.cache, inputs, logits=False))
        return self.prefills[key]

    def prepare_prefills(self) -> int:
        """Capture now every prefill shape this session can take (prefill_shapes.shapes), for each
        model whose cache is attention only, so that no request waits on a first-time capture (as
        the serving warm-up steps every live count): only on a backend that captures, and only while
        no request is live (a warm-up forward writes slot 0's cache rows). Returns the shapes captured."""
        if not self.engine.backend.captures or int(self.ctx.active.sum()):
            return 0
        done = 0
        for state in self.ctx.models.values():
            if not self._bucketed(state):
                continue
            # the largest first: the smaller ones then plan their buffers as views of its (SharedPool)
            for rows, size in sorted(prefill_shapes.shapes(self.B, self.max_seq), key=lambda rs: -rs[0] * rs[1]):
                inputs, forward = self._prefill_forward(state, rows, size)
                inputs.slots.zero_()
                inputs.lens.zero_()
                done += self.ctx.prepare_timed(state, ("prefill", rows, size), forward.run)
        return done

    def _idle_drafters(self, live: int) -> set:
        """(model, "draft") of the drafters no draft op uses with `live` requests decoding (each op
        using it has `off_at` <= live, and its cache is attention only): a prefill leaves their rows
        empty (lens 0) and marks those ops behind, so the first step they draft again resyncs them on
        the whole history (catch_up.resync; token forcing equal either way, the drafter's work
        only moves to when it is needed)."""
        from .ops.common import mark_behind, model_of, off_at_live
        info, by_model = self.engine.info, {}
        for op in self.engine.pipeline.step.ops:
            if info.has_role(op, "draft") and not info.has_role(op, "verify") and op.symbols:
                by_model.setdefault(model_of(op), []).append(op)
        idle = set()
        for name, ops in by_model.items():
            state = self.ctx.models.get((name, "draft"))
            if state is not None and all(off_at_live(op, live) for op in ops) \
                    and getattr(state.cache, "recurrent", None) is None:
                idle.add((name, "draft"))
                for op in ops:
                    mark_behind(self.ctx, op)
        return idle


class DecodeSession:
    """Continuous batching over one Session: up to B requests decode together; requests are added
    into free slots (prefilled at once) and leave when done, between steps."""

    def __init__(self, session: Session):
        self.session = session
        self.requests: list[Request] = []  # in the order added
        self.slots: list[Request | None] = [None] * session.B
        self.step_seconds: list[float] = []

    @property
    def capacity(self) -> int:
        return self.session.B

    def free_slots(self) -> int:
        return sum(1 for r in self.slots if r is None or r.done)

    def active(self) -> int:
        return sum(1 for r in self.slots if r is not None and not r.done)

    def add_many(self, items) -> list[Request]:
        """items: (prompt ids, max_new, temperature, seed[, stop ids]); returns their Requests."""
        ctx, engine = self.session.ctx, self.session.engine
        free = [s for s, r in enumerate(self.slots) if r is None or r.done]
        if len(items) > len(free):
            raise SpecirError(f"{len(items)} requests for {len(free)} free slots",
                              hint="wait for requests to finish, or open a session with more capacity")
        engine.check_lengths([item[0] for item in items], max(item[1] for item in items))
        rows = engine.rows_needed(max(len(item[0]) for item in items), max(item[1] for item in items))
        if rows > self.session.max_seq:
            raise SpecirError(f"a request needs {rows} cache rows; this session holds {self.session.max_seq}",
                              hint="open the session with a larger max_rows")
        added, entries = [], []
        for slot, item in zip(free, items):
            prompt, max_new, temperature, seed = item[:4]
            stop = frozenset(item[4]) if len(item) > 4 and item[4] else frozenset()
            if temperature > 0 and not self.session.sampling:
                raise SpecirError("this session decodes greedily; a request asks for temperature > 0",
                                  hint="open the session with sampling=True")
            r = Request(list(prompt), int(max_new), slot, tokens=list(prompt), stop=stop)
            self.slots[slot] = r
            self.requests.append(r)
            added.append(r)
            entries.append((slot, list(prompt)))
            ctx.temperature[slot] = float(temperature)
            ctx.seed[slot] = int(seed) & 0x7FFFFFFF
        self.session.prefill(entries)
        return added

    def add(self, prompt: list[int], max_new: int, temperature: float = 0.0, seed: int = 0, stop=()) -> Request:
        return self.add_many([(prompt, max_new, temperature, seed, stop)])[0]

    def cancel(self, request: Request) -> None:
        if not request.done:
            request.done, request.finish_reason = True, "cancelled"
            self.session.ctx.active[request.slot] = 0

    def forget_finished(self) -> None:
        """Drop finished requests from `requests` and the step times kept so far, so that a
        long-lived session (a server) holds no history; slots, caches and active requests stay."""
        self.requests = [r for r in self.requests if not r.done]
        self.step_seconds.clear()

    def step(self) -> list[tuple[Request, list[int]]]:
        """One decode step for every active request: (request, tokens it kept this step)."""
        sess, ctx = self.session, self.session.ctx
        ctx.requests = self.slots
        backend = sess.engine.backend
        first_time, start = backend.setup_s, time.perf_counter()
        sess.engine.program.run(ctx, sess)
        data = ctx.readback.cpu().tolist()
        self.step_seconds.append(time.perf_counter() - start - (backend.setup_s - first_time))
        W = ctx.emit_width
        events, finished = [], []
        for slot, r in enumerate(self.slots):
            if r is None or r.done:
                continue
            kept = r.append(data[slot][:data[slot][W]], sess.engine.eos)
            events.append((r, kept))
            if r.done:
                finished.append(slot)
        if finished:
            ctx.active[torch.tensor(finished, device=ctx.device)] = 0
        return events
