"""The state of one batch of B request slots that every step op reads and writes.

`StepContext` holds, as device tensors: `pending` [B] (each request's pending token: emitted, not
yet in the verifier's cache), `active` [B] int32 (0 freezes a slot: nothing is committed for it),
`temperature` [B] float32, `seed` and `counter` [B] int64 (the counter-based random numbers, see
random.py; commit advances `counter`), and `readback` [B, W + 1] (the tokens each request emitted
this step, and their number in the last column: the one tensor the host copies per step).
Per model it holds a `ModelState` (backend executor, KV cache, committed rows `lens` [B] int32)
under the role the step uses it in: "verify" (its cache holds every committed token but the
pending one; commit moves the accepted path into place) or "draft" (it catches up each step by
feeding `feed[:, :n_feed]`, the tokens emitted last step, the pending one included).
`forward(state, key, T, ...)` gives a forward with static input buffers, built once per key and
reused by every step (CUDA-graph replays need fixed addresses); `launch(state, key, run)` runs such a
forward from a host op the way device segments run (captured and replayed on a capturing backend);
`launch_timed` runs a prefill's forwards so (its first call too is on the clock).
`op_state` keeps per-op state.
Python-side values never change inside a step: everything a step changes is a tensor, in place.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .forward_inputs import ForwardInputs
from .random import uniform


@dataclass
class ModelState:
    name: str
    role: str  # "verify" | "draft"
    executor: object  # new_cache(B, max_seq), forward_on(cache, inputs) -> .run() -> logits
    cache: object
    lens: torch.Tensor
    feed: torch.Tensor | None = None
    n_feed: torch.Tensor | None = None
    forwards: dict = field(default_factory=dict)
    graphs: dict = field(default_factory=dict)  # launch(): key -> "warmed" | (replay, output)


class StepContext:
    def __init__(self, B: int, max_seq: int, device, backend, *, sampling: bool, emit_width: int):
        self.B, self.max_seq, self.device, self.backend, self.sampling = B, max_seq, device, backend, sampling
        self.emit_width = emit_width
        z = lambda *shape, dtype=torch.long: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        self.pending = z(B)
        self.active = z(B, dtype=torch.int32)
        self.temperature = z(B, dtype=torch.float32)
        self.seed = z(B)
        self.counter = z(B)
        self.readback = z(B, emit_width + 1)
        self.models: dict[tuple[str, str], ModelState] = {}
        self.op_state: dict[int, object] = {}
        self.requests: list = []  # host-side requests by slot (host ops read their token history)
        self.variants: dict[int, object] = {}  # this step's op variants (id(op) -> value), set by the program
        self.info = None  # the pipeline's StepInfo (set by the engine's session; op setups read it)

    def add_model(self, name: str, role: str, executor) -> ModelState:
        key = (name, role)
        if key not in self.models:
            z = lambda *shape, dtype: torch.zeros(*shape, dtype=dtype, device=self.device)  # noqa: E731
            state = ModelState(name, role, executor, executor.new_cache(self.B, self.max_seq),
                               z(self.B, dtype=torch.int32))
            if role == "draft":
                state.feed = z(self.B, self.emit_width, dtype=torch.long)
                state.n_feed = z(self.B, dtype=torch.int32)
            self.models[key] = state
        return self.models[key]

    def state(self, name: str, role: str) -> ModelState:
        return self.models[(name.lstrip("@"), role)]

    def forward(self, state: ModelState, key, T: int, *, mask_width: int = 0, offsets: bool = False):
        """(inputs, forward) of `state`'s model for `key`: T new tokens per request; `inputs.lens` is
        `state.lens` itself. Built on first use, then reused."""
        entry = state.forwards.get(key)
        if entry is None:
            z = lambda *shape, dtype: torch.zeros(*shape, dtype=dtype, device=self.device)  # noqa: E731
            inputs = ForwardInputs(z(self.B, T, dtype=torch.long), z(self.B, T, dtype=torch.long), state.lens,
                                   None, z(self.B, dtype=torch.int32) if offsets else None,
                                   z(self.B, T, mask_width, dtype=torch.bool) if mask_width else None)
            entry = (inputs, state.executor.forward_on(state.cache, inputs))
            state.forwards[key] = entry
        return entry

    def launch(self, state: ModelState, key, run):
        """run() (a forward over the static inputs of `key`, returning one output tensor), launched from
        a host op: eagerly where the backend does not capture; where it does, eagerly the first time
        (on the capture stream: kernels compile, lazy buffers appear), captured the second time (in its
        own graph pool) and replayed from then on. The output is the same tensor on every replay."""
        if not self.captures_forwards(state):
            return run()
        entry = state.graphs.get(key)
        if entry is None:
            output = self.backend.warm(run)
            state.graphs[key] = "warmed"
            return output
        if entry == "warmed":
            entry = state.graphs[key] = self.backend.capture(run, self.backend.graph_pool())
        replay, output = entry
        replay()
        return output

    def launch_timed(self, state: ModelState, key, run, *, capture: bool = True) -> None:
        """run() (a forward writing only caches, e.g. a prefill's) where every call is real work on
        the clock: where the backend captures, the first call of `key` warms it and captures it
        (`prepare_timed`, set-up), and every call, the first included, replays the graph (eagerly
        where the executor's forwards are not captured, StepContext.captures_forwards, or with
        capture=False: the first call is then warmed only)."""
        self.prepare_timed(state, key, run, capture=capture)
        entry = state.graphs[key]
        if entry == "eager":
            run()
        else:
            entry[0]()

    def prepare_timed(self, state: ModelState, key, run, *, capture: bool = True) -> bool:
        """Make `key`'s entry for `launch_timed` now: where the backend captures, run() once eagerly
        (kernels compile; its writes are rewritten by the real runs) and capture it (both through the
        backend's `first_time`: set-up). True when it captured a graph just now."""
        if key in state.graphs:
            return False
        if self.backend.captures:
            self.backend.warm(run)
        captures = capture and self.captures_forwards(state)
        state.graphs[key] = self.backend.capture(run, self.backend.graph_pool()) if captures else "eager"
        return captures

    def captures_forwards(self, state: ModelState) -> bool:
        """Whether `launch` captures `state`'s forwards: a capturing backend, and an executor whose
        forward reads nothing on the host (a length-dependent rope does; it runs eagerly)."""
        return self.backend.captures and getattr(state.executor, "static", True)

    def prepare(self, state: ModelState, key, run) -> None:
        """Warm and capture `key`'s forward now (as `launch` would over its next two calls), so a
        later `launch` only replays; nothing where forwards are not captured."""
        if self.captures_forwards(state):
            while not isinstance(state.graphs.get(key), tuple):
                self.launch(state, key, run)

    def release(self) -> None:
        """Drop every model's forwards and captured graphs (their buffers and graph pools)."""
        for state in self.models.values():
            state.forwards.clear()
            state.graphs.clear()

    def live_requests(self) -> int:
        """Requests decoding this step, from the host's view (no device read)."""
        return sum(1 for r in self.requests if r is not None and not r.done)

    def uniform(self, shape: tuple[int, ...], stream: int) -> torch.Tensor:
        return uniform(self.seed, self.counter, shape, stream)

    def choose(self, logits: torch.Tensor, stream: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The next token from logits [B, V]: argmax for requests at temperature 0, else a draw from
        q = softmax(logits / T) (returned, [B, V]; None outside sampling mode)."""
        greedy = self.backend.argmax(logits)
        if not self.sampling:
            return greedy, None
        t = self.temperature
        q = torch.softmax(logits.float() / torch.where(t > 0, t, 1.0)[:, None], dim=-1)
        from .random import sample
        drawn = sample(q, self.uniform((), stream))
        return torch.where(t > 0, drawn, greedy), q
