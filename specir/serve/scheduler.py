"""The engine loop: one thread owns the StepEngine and its DecodeSessions (the engine is not
thread-safe); HTTP handlers talk to it through `submit` and `cancel` only.

Contract:
- `Scheduler(engine, capacity, rows, max_queue, metrics)`; `start()` opens two lanes, a greedy
  DecodeSession (`engine.open(capacity, rows, sampling=False)`: what `specir bench` times) and a
  sampling one (`sampling=True`: softmax draws on every step), decodes a warm-up request in each
  (on a backend that captures, two steps at every live count 1 .. capacity, so that no request
  waits on a first-time capture, as vLLM captures its batch sizes at start-up), then runs the loop
  in a daemon thread; `stop()` ends it and fails what is left with a 503.
- `submit(jobs)` (any thread) queues every job or none: a 429 `ApiError` when more than
  `capacity + max_queue` jobs would be in the server, a 503 once stopping.
- The loop, between steps: applies cancellations (a cancelled request leaves its slot at once),
  admits waiting jobs first come, first served while fewer than `capacity` run (several prefilled
  together when they fit the session's rows), then runs one step of a lane's whole batch (the two
  lanes in turn when both hold requests). A job at temperature > 0 goes to the sampling lane; a
  greedy one too while that lane decodes a sampled request (its greedy rows give the greedy
  tokens), else to the greedy lane: a mixed load decodes in one batch, a greedy load in the
  cheaper session.
- Each job's `sink(Event)` is called on this thread, never blocking: `Event(tokens)` per step that
  kept tokens, one last `Event(tokens, finish_reason)` ("length" | "eos" | "stop" | "cancelled", or
  "error" with an ApiError), and nothing after it.
- A prefill that raises fails that job only (the others of its group are prefilled again one by
  one). A step that raises fails the request that caused it: its lane is restarted (a fresh
  session; every request re-prefilled from its prompt and the tokens it has, so greedy output is
  unchanged) with its requests marked suspect, and a suspect joins only a batch holding no other
  suspect: a step that fails with one suspect in the batch blames that one. A bug in this loop
  fails the running requests and starts clean; the loop itself never exits until `stop()`.
"""
from __future__ import annotations

import secrets
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from ..errors import SpecirError
from ..step.engine import request_seed
from .protocol import ApiError

MAX_RESTARTS = 4  # a request restarted this often by failing steps is failed itself


@dataclass
class Event:
    tokens: list[int]
    finish_reason: str | None = None
    error: ApiError | None = None


@dataclass(eq=False)
class Job:
    prompt: list[int]
    max_new: int
    temperature: float
    seed: int
    stop_ids: frozenset
    sink: Callable[[Event], None]
    arrived: float = field(default_factory=time.monotonic)
    # owned by the scheduler thread
    generated: list[int] = field(default_factory=list)
    request: object = None
    suspect: bool = False
    restarts: int = 0
    first_token_at: float | None = None
    finished: bool = False
    cancel_reason: str | None = None  # set by cancel() from any thread

    def item(self) -> tuple:
        """What DecodeSession.add takes: the prompt continued by the tokens generated so far."""
        seed = self.seed if not self.restarts else request_seed(self.seed, self.restarts)
        return (self.prompt + self.generated, self.max_new - len(self.generated), self.temperature, seed,
                self.stop_ids)


def choose_seed(seed: int | None, index: int) -> int:
    """The engine seed of choice `index` of a request: `specir run --seed S` gives choice 0 of seed S
    the same stream; no seed draws a fresh one."""
    return request_seed(seed, index) if seed is not None else secrets.randbelow(1 << 31)


class Lane:
    """One DecodeSession and the jobs in its slots (scheduler thread only)."""

    def __init__(self, engine, capacity: int, rows: int, sampling: bool):
        self.engine, self.capacity, self.rows, self.sampling = engine, capacity, rows, sampling
        self.prefill_shapes = 0  # prefill forwards the warm-up captured
        self.decode = None
        self.by_slot: dict[int, Job] = {}

    def open(self) -> None:
        """A fresh DecodeSession: every slot free (whatever ran is forgotten)."""
        self.by_slot.clear()
        self.decode = self.engine.open(self.capacity, self.rows, sampling=self.sampling)

    def warm(self) -> None:
        """Decode a warm-up request; where the backend captures, step twice at each live count
        1 .. capacity (requests join one by one and then leave): a step shape runs eagerly the first
        time and is captured the second, so every shape a batch of this lane takes at a live count
        is compiled and captured before the first user request; so is every prefill shape of a
        model whose forwards are captured and whose cache is attention only (Session.prepare_prefills;
        recurrent models prefill eagerly), so that no admitted request waits on a capture either."""
        temperature = 0.7 if self.sampling else 0.0
        prompt = [i % 7 + 1 for i in range(8)]
        self.prefill_shapes = self.decode.session.prepare_prefills()  # every prefill shape, captured now
        if not self.engine.backend.captures or self.capacity == 1:
            request = self.decode.add(prompt, 4, temperature, 1)
            while not request.done:
                self.decode.step()
            self.decode.forget_finished()
            return
        # as long as the session's rows allow: every request stays live through the ramp's steps
        spare = self.engine.rows_needed(len(prompt), 1) - 1
        room = min(self.decode.session.max_seq - spare, self.engine.max_position - len(prompt))
        if room < 1:
            raise SpecirError(f"the serving session's {self.decode.session.max_seq} cache rows hold no warm-up request",
                              hint="raise the tokens a request may use")
        requests = []
        for n in range(1, self.capacity + 1):
            requests.append(self.decode.add(prompt, room, temperature, n))
            self.decode.step()  # a new step shape runs eagerly first (its kernels compile) ...
            self.decode.step()  # ... and is captured the second time (StepProgram: warmed, then captured)
        for request in requests:
            if not request.done:
                self.decode.cancel(request)
        self.decode.forget_finished()

    def samples(self) -> bool:
        return any(j.temperature > 0 for j in self.by_slot.values())


class Scheduler:
    def __init__(self, engine, capacity: int, rows: int, max_queue: int, metrics):
        self.engine, self.capacity, self.rows, self.max_queue, self.metrics = engine, capacity, rows, max_queue, metrics
        self.lanes = [Lane(engine, capacity, rows, False), Lane(engine, capacity, rows, True)]
        self.thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._waiting: deque[Job] = deque()
        self._cancels: list[Job] = []
        self._in_server = 0
        self._running = 0
        self._stopping = False
        self._turn = 0
        self._lane_of: dict[int, Lane] = {}  # id(job) -> its lane, for running jobs (scheduler thread)

    # ------------------------------------------------------------------ any thread
    def start(self) -> None:
        start = time.perf_counter()
        for lane in self.lanes:
            lane.open()
            lane.warm()
        captured = sum(lane.prefill_shapes for lane in self.lanes)
        if captured:
            print(f"specir serve: warm-up captured {captured} prefill forwards and every step shape in "
                  f"{time.perf_counter() - start:.1f} s{_device_memory(self.engine.device)}", file=sys.stderr,
                  flush=True)
        self.thread = threading.Thread(target=self._loop, name="specir-scheduler", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self.thread is not None:
            self.thread.join(timeout)

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def submit(self, jobs: list[Job]) -> None:
        with self._cond:
            if self._stopping:
                raise ApiError(503, "the server is shutting down", "server_error", None, "shutting_down")
            limit = self.capacity + self.max_queue
            if self._in_server + len(jobs) > limit:
                raise ApiError(429, f"too many requests: {self._running} decoding and "
                                    f"{self._in_server - self._running} waiting; this server takes {self.capacity} "
                                    f"at a time and queues {self.max_queue} more (--max-batch-size, --max-queue); "
                                    f"retry later", "rate_limit_error", None, "queue_full")
            self._waiting.extend(jobs)
            self._in_server += len(jobs)
            self._cond.notify_all()

    def cancel(self, job: Job, reason: str = "cancelled") -> None:
        with self._cond:
            if job.finished or job.cancel_reason is not None:
                return
            job.cancel_reason = reason
            self._cancels.append(job)
            self._cond.notify_all()

    def gauges(self) -> dict[str, float]:
        with self._cond:
            return {"queue_depth": self._in_server - self._running, "running_requests": self._running,
                    "max_batch_size": self.capacity, "max_queue": self.max_queue}

    # ------------------------------------------------------------------ the loop
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._stopping or self._cancels or self._lane_of
                           or (self._waiting and self._running < self.capacity)):
                    self._cond.wait()
                if self._stopping:
                    break
                cancels, self._cancels = self._cancels, []
            try:
                for job in cancels:
                    self._cancel(job)
                self._admit()
                busy = [lane for lane in self.lanes if lane.by_slot]
                if busy:
                    self._turn += 1
                    self._step(busy[self._turn % len(busy)])
            except Exception as exc:  # a bug here: fail what runs, start clean, go on serving
                traceback.print_exc(file=sys.stderr)
                self.metrics.engine_failure()
                for lane in self.lanes:
                    for job in list(lane.by_slot.values()):
                        self._fail(job, exc)
                    try:
                        self._reopen(lane)
                    except Exception:
                        traceback.print_exc(file=sys.stderr)
                        time.sleep(1.0)
        self._shutdown()

    def _admit(self) -> None:
        while True:
            groups: dict[int, list[Job]] = {0: [], 1: []}  # per lane: greedy, sampling
            with self._cond:
                room = self.capacity - self._running
                while self._waiting and room > 0:
                    job = self._waiting[0]
                    samples = self.lanes[1].samples() or any(j.temperature > 0 for j in groups[1])
                    index = 1 if job.temperature > 0 or samples else 0
                    lane, group = self.lanes[index], groups[index]
                    if job.suspect and (any(j.suspect for j in lane.by_slot.values()) or any(g.suspect for g in group)):
                        break
                    if len(group) >= lane.decode.free_slots() or (group and not self._fits(lane, group + [job])):
                        break
                    group.append(self._waiting.popleft())
                    room -= 1
            if not groups[0] and not groups[1]:
                return
            for index, group in groups.items():
                if group:
                    self._add(self.lanes[index], group)

    def _add(self, lane: Lane, group: list[Job]) -> None:
        backend = lane.engine.backend
        first_time, start = backend.setup_s, time.perf_counter()
        try:
            requests = lane.decode.add_many([job.item() for job in group])
            lane.engine.sync()  # a prefill's launches are asynchronous: its seconds end when it does
            self.metrics.prefill(time.perf_counter() - start - (backend.setup_s - first_time))
        except Exception as exc:
            self._drop_orphans(lane)
            if len(group) == 1:
                self._fail(group[0], exc)
                return
            for job in group:  # find the one that fails
                try:
                    self._attach(lane, job, lane.decode.add_many([job.item()])[0])
                except Exception as one:
                    self._drop_orphans(lane)
                    self._fail(job, one)
            return
        for job, request in zip(group, requests):
            self._attach(lane, job, request)

    def _fits(self, lane: Lane, group: list[Job]) -> bool:
        longest = max(len(j.prompt) + len(j.generated) for j in group)
        most = max(j.max_new - len(j.generated) for j in group)
        return (self.engine.rows_needed(longest, most) <= lane.decode.session.max_seq
                and longest + most <= self.engine.max_position)

    def _attach(self, lane: Lane, job: Job, request) -> None:
        if job.restarts == 0:
            self.metrics.admitted(len(job.prompt))
        job.request = request
        lane.by_slot[request.slot] = job
        self._lane_of[id(job)] = lane
        with self._cond:
            self._running += 1

    def _drop_orphans(self, lane: Lane) -> None:
        """After a failed add: cancel the requests it left in slots that no job owns."""
        for request in lane.decode.slots:
            if request is not None and not request.done:
                owner = lane.by_slot.get(request.slot)
                if owner is None or owner.request is not request:
                    lane.decode.cancel(request)

    def _step(self, lane: Lane) -> None:
        backend = lane.engine.backend
        first_time, start = backend.setup_s, time.perf_counter()
        try:
            events = lane.decode.step()
        except Exception as exc:
            self._step_failed(lane, exc)
            return
        seconds = time.perf_counter() - start - (backend.setup_s - first_time)  # warm-ups, captures: not decoding
        now, kept, finished = time.monotonic(), [], False
        for request, tokens in events:
            job = lane.by_slot.get(request.slot)
            if job is None or job.request is not request:
                continue
            job.generated += tokens
            job.suspect = False
            if tokens and job.first_token_at is None:
                job.first_token_at = now
                self.metrics.first_token(now - job.arrived)
            kept.append((len(tokens), request.done))
            if request.done:
                finished = True
                self._release(job)
                self._finish(job, Event(tokens, request.finish_reason))
            elif tokens:
                job.sink(Event(tokens))
        self.metrics.step(seconds, kept)
        if finished:
            lane.decode.forget_finished()

    def _step_failed(self, lane: Lane, exc: Exception) -> None:
        traceback.print_exc(file=sys.stderr)
        self.metrics.engine_failure()
        batch = list(lane.by_slot.values())
        suspects = [j for j in batch if j.suspect]
        blamed = batch[0] if len(batch) == 1 else suspects[0] if len(suspects) == 1 else None
        self._reopen(lane)
        retry = []
        for job in batch:
            job.request = None
            if job is blamed or job.restarts >= MAX_RESTARTS:
                self._finish(job, Event([], "error", _engine_error(exc)))
            else:
                job.restarts += 1
                job.suspect = blamed is None
                retry.append(job)
        with self._cond:
            self._waiting.extendleft(reversed(retry))

    def _cancel(self, job: Job) -> None:
        with self._cond:
            if job in self._waiting:
                self._waiting.remove(job)
        if job.finished:
            return
        lane = self._lane_of.get(id(job))
        if lane is not None and job.request is not None and not job.request.done:
            lane.decode.cancel(job.request)
        self._release(job)
        self._finish(job, Event([], job.cancel_reason or "cancelled"))

    def _release(self, job: Job) -> None:
        lane = self._lane_of.pop(id(job), None)
        if lane is not None and job.request is not None and lane.by_slot.get(job.request.slot) is job:
            del lane.by_slot[job.request.slot]
            with self._cond:
                self._running -= 1

    def _fail(self, job: Job, exc: Exception) -> None:
        lane = self._lane_of.get(id(job))
        if lane is not None and job.request is not None and not job.request.done:
            lane.decode.cancel(job.request)
        self._release(job)
        self._finish(job, Event([], "error", _engine_error(exc)))

    def _finish(self, job: Job, event: Event) -> None:
        if job.finished:
            return
        job.finished = True
        with self._cond:
            self._in_server -= 1
        self.metrics.finished_request(event.finish_reason, time.monotonic() - job.arrived)
        job.sink(event)

    def _reopen(self, lane: Lane) -> None:
        for job in lane.by_slot.values():
            self._lane_of.pop(id(job), None)
        with self._cond:
            self._running -= len(lane.by_slot)
        lane.open()

    def _shutdown(self) -> None:
        error = ApiError(503, "the server is shutting down", "server_error", None, "shutting_down")
        with self._cond:
            waiting, self._waiting = list(self._waiting), deque()
        running = [job for lane in self.lanes for job in lane.by_slot.values()]
        for job in running + waiting:
            self._release(job)
            self._finish(job, Event([], "error", error))


def _device_memory(device) -> str:
    """"; N GiB of device memory allocated (M reserved)" on a CUDA device, else ""."""
    if getattr(device, "type", "") != "cuda":
        return ""
    import torch
    return (f"; {torch.cuda.memory_allocated(device) / 2**30:.1f} GiB of device memory allocated "
            f"({torch.cuda.memory_reserved(device) / 2**30:.1f} reserved)")


def _engine_error(exc: Exception) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, SpecirError):
        return ApiError(400, exc.message + (f" ({exc.hint})" if exc.hint else ""), "invalid_request_error")
    return ApiError(500, f"the engine failed on this request ({type(exc).__name__}: {exc}); the server goes on "
                         f"serving", "server_error", None, "engine_error")
