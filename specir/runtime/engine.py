"""The decode loop: prefill, then run the IR's step until every request is done.

Each step op is interpreted by the function registered for its name in STEP_OPS (plugins may
add more), in the order the IR lists them; values flow through an SSA environment. The context
is the list of active requests. Invariant per request: the target's cache has committed every
token but the last (`pending`) one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..errors import SpecirError
from ..ir.nodes import Pipeline
from . import acceptance
from .drafting import draft_chain, draft_ngram, draft_tree
from .memory import draft_width
from .model_runner import ModelRunner
from .threads import apply_threads
from .tree_mask import ancestor_mask
from .values import Accepted, ChainDraft, TreeDraft, Verified
from .weights import load_weights


@dataclass
class Request:
    prompt: list[int]
    max_new: int
    slot: int
    tokens: list[int] = field(default_factory=list)  # prompt + generated; the last one is pending
    generated: list[int] = field(default_factory=list)
    accept_lengths: list[int] = field(default_factory=list)
    done: bool = False

    def append(self, emitted: list[int], eos: set[int]) -> None:
        """Take one step's emitted tokens, cut at the first EOS and at max_new; mark done."""
        emitted = emitted[: self.max_new - len(self.generated)]
        for i, t in enumerate(emitted):
            if t in eos:
                emitted = emitted[: i + 1]
                self.done = True
                break
        self.generated += emitted
        self.tokens += emitted
        self.accept_lengths.append(len(emitted))
        if len(self.generated) >= self.max_new:
            self.done = True


@dataclass
class Result:
    tokens: list[int]
    accept_lengths: list[int]
    seconds: float

    @property
    def tau(self) -> float:
        return sum(self.accept_lengths) / max(len(self.accept_lengths), 1)


@dataclass
class StepState:
    temperature: float
    generator: torch.Generator
    drafter_tokens: dict = field(default_factory=dict)


class Engine:
    """Runs one pipeline on a device with a backend's kernels. Weights load once; caches are
    sized per `generate` call."""

    def __init__(self, pipeline: Pipeline, *, device: str = "cpu", kernels: dict | None = None,
                 backend: str = "reference", weights: dict | None = None):
        if pipeline.step is None:
            raise SpecirError("the pipeline has no step", hint="add step(%ctx: context) { ... }")
        self.pipeline, self.device, self.backend = pipeline, device, backend
        if kernels is None:
            from ..backends.reference.ops import KERNELS
            kernels = KERNELS
        self.kernels = kernels
        used = {s.lstrip("@") for op in pipeline.step.ops for s in op.symbols}
        self.models = {m.name: m for m in pipeline.models if m.name in used}
        self.weights = weights or {name: load_weights(m, device) for name, m in self.models.items()}
        if str(device) == "cpu":
            apply_threads(self.weights)
        verify_ops = [op for op in pipeline.step.ops if op.name.startswith("verify.")]
        if not verify_ops:
            raise SpecirError("the step verifies nothing", hint="a step needs a verify op on the target")
        self.target = verify_ops[-1].symbols[0].lstrip("@")
        target = self.models[self.target]
        self.eos = set(target.attrs.get("eos", ()))
        self.max_position = int(target.attrs.get("max_position", 1 << 30))
        self.runners: dict[str, ModelRunner] = {}

    # ----------------------------------------------------------------- set-up
    def max_draft_width(self) -> int:
        return draft_width(self.pipeline)

    def _make_runners(self, slots: int, max_seq: int) -> None:
        self.runners = {name: ModelRunner(m, self.weights[name], slots=slots, max_seq=max_seq, device=self.device,
                                          kernels=self.kernels, backend=self.backend)
                        for name, m in self.models.items()}

    def _check_lengths(self, prompts, max_new):
        for i, p in enumerate(prompts):
            if not p:
                raise SpecirError(f"prompt {i} is empty", hint="give at least one token (--prompt TEXT)")
            if len(p) >= self.max_position:
                raise SpecirError(f"prompt {i} has {len(p)} tokens; the target's context is {self.max_position}",
                                  hint="shorten the prompt")
            if len(p) + max_new > self.max_position:
                raise SpecirError(f"prompt {i} ({len(p)} tokens) + max-new-tokens ({max_new}) exceeds the "
                                  f"target's context of {self.max_position}",
                                  hint=f"use --max-new-tokens {self.max_position - len(p)} or less")
        if max_new < 1:
            raise SpecirError("max-new-tokens must be at least 1", hint="e.g. --max-new-tokens 64")

    # ----------------------------------------------------------------- decode
    def generate(self, prompts: list[list[int]], max_new_tokens: int = 64, *, temperature: float = 0.0,
                 seed: int = 0, on_step=None) -> list[Result]:
        self._check_lengths(prompts, max_new_tokens)
        width = self.max_draft_width()
        max_seq = max(len(p) for p in prompts) + max_new_tokens + 2 * width + 4
        self._make_runners(len(prompts), max_seq)
        generator = torch.Generator().manual_seed(seed)
        state = StepState(temperature, generator)
        requests = [Request(list(p), max_new_tokens, i, tokens=list(p)) for i, p in enumerate(prompts)]
        start = time.perf_counter()
        self._prefill(requests)
        while True:
            active = [r for r in requests if not r.done]
            if not active:
                break
            self.step(active, state)
            if on_step:
                on_step(requests)
        if str(self.device).startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        return [Result(r.generated, r.accept_lengths, seconds) for r in requests]

    def _prefill(self, requests) -> None:
        """Commit every prompt token but the last into the target's cache."""
        runner = self.runners[self.target]
        feeds = [r.tokens[:-1] for r in requests]
        T = max(len(f) for f in feeds)
        if T == 0:
            return
        ids = torch.zeros(len(requests), T, dtype=torch.long)
        for b, f in enumerate(feeds):
            ids[b, :len(f)] = torch.tensor(f, dtype=torch.long)
        pos = torch.arange(T)[None, :].expand(len(requests), T)
        runner.forward([r.slot for r in requests], ids.to(self.device), pos.to(self.device))
        for b, r in enumerate(requests):
            runner.cache.commit_prefix(r.slot, len(feeds[b]))

    def step(self, active: list[Request], state: StepState) -> None:
        env = {self.pipeline.step.params[0][0]: active}
        for op in self.pipeline.step.ops:
            fn = STEP_OPS.get(op.name)
            if fn is None:
                raise SpecirError(f"no runtime for step op {op.name!r}", location=op.loc,
                                  hint="register one in specir.runtime.engine.STEP_OPS")
            out = fn(self, op, env, state)
            if op.result is not None:
                env[op.result] = out

    # ----------------------------------------------------------------- verify / commit helpers
    def verify_nodes(self, model: str, active, tokens: list[list[int]], parents: list[list[int]] | None) -> Verified:
        runner = self.runners[model]
        T = max(len(t) for t in tokens)
        B = len(active)
        ids = torch.zeros(B, T, dtype=torch.long)
        pos = torch.zeros(B, T, dtype=torch.long)
        mask = None
        if parents is not None:
            mask = torch.stack([ancestor_mask(p, T) for p in parents])
        for b, r in enumerate(active):
            base = runner.cache.lens[r.slot]
            ids[b, :len(tokens[b])] = torch.tensor(tokens[b])
            if parents is None:
                pos[b] = torch.arange(base, base + T)
            else:
                depths = TreeDraft(tokens, parents).depths(b)
                pos[b, :len(depths)] = torch.tensor(depths) + base
                pos[b, len(depths):] = base
        logits = runner.forward([r.slot for r in active], ids.to(self.device), pos.to(self.device),
                                mask=None if mask is None else mask.to(self.device))
        if parents is None:
            parents = [[t - 1 for t in range(len(tok))] for tok in tokens]
        return Verified(logits, tokens, parents)

    def commit(self, active, accepted: Accepted, compact: bool) -> None:
        self.commit_kv(active, accepted, compact)
        self.record(active, accepted)

    def commit_kv(self, active, accepted: Accepted, compact: bool) -> None:
        """Promote the accepted nodes' KV rows in the target's cache."""
        runner = self.runners[self.target]
        for r, path in zip(active, accepted.paths):
            if compact:
                runner.cache.commit_path(r.slot, path)
            else:
                runner.cache.commit_prefix(r.slot, len(path))

    def record(self, active, accepted: Accepted) -> None:
        """Append the emitted tokens (cut at EOS and at max_new) and mark finished requests."""
        for r, emitted in zip(active, accepted.emitted):
            r.append(emitted, self.eos)


# ---------------------------------------------------------------------- step ops

def _draft_operand(op, env):
    values = op.values
    return env[values[0]] if len(values) == 2 else None


def _step_draft_chain(engine, op, env, state):
    return draft_chain(engine.runners[op.symbols[0][1:]], env[op.values[0]], op.attrs["k"], state)


def _step_draft_ngram(engine, op, env, state):
    a = op.attrs
    return draft_ngram(env[op.values[0]], a["k"], a.get("max_ngram", 3), a.get("min_ngram", 1))


def _step_draft_tree(engine, op, env, state):
    a = op.attrs
    return draft_tree(engine.runners[op.symbols[0][1:]], env[op.values[0]], a["depth"], a["topk"], a["budget"],
                      state, expand=a.get("expand", "static"), threshold=a.get("threshold", 0.0))


def _step_verify_chain(engine, op, env, state):
    active = env[op.values[0]]
    draft = env[op.values[1]] if len(op.values) > 1 else ChainDraft([[] for _ in active], [None] * len(active))
    tokens = [[r.tokens[-1]] + d for r, d in zip(active, draft.tokens)]
    return engine.verify_nodes(op.symbols[0][1:], active, tokens, None)


def _step_verify_tree(engine, op, env, state):
    active, tree = env[op.values[0]], env[op.values[1]]
    return engine.verify_nodes(op.symbols[0][1:], active, tree.tokens, tree.parents)


def _step_accept_greedy(engine, op, env, state):
    v: Verified = env[op.values[-1]]
    return acceptance.greedy(v.logits, v.tokens, v.parents)


def _step_accept_sample(engine, op, env, state):
    v: Verified = env[op.values[-1]]
    draft = _draft_operand(op, env)
    q = draft.q if isinstance(draft, ChainDraft) else None
    return acceptance.sample(v.logits, v.tokens, v.parents, state.temperature, state.generator, q)


def _step_commit(engine, op, env, state):
    engine.commit(env[op.values[0]], env[op.values[1]], op.attrs.get("kv", "prefix") == "compact")


STEP_OPS = {
    "draft.chain": _step_draft_chain,
    "draft.ngram": _step_draft_ngram,
    "draft.tree": _step_draft_tree,
    "verify.chain": _step_verify_chain,
    "verify.tree": _step_verify_tree,
    "accept.greedy": _step_accept_greedy,
    "accept.sample": _step_accept_sample,
    "commit": _step_commit,
}
