"""What a backend gives the decode step, with torch defaults every backend may keep.

`StepBackend(device)`:
- `name`: picks an op's backend-specific lowering (`StepInterfaces.lowerings[name]`), else its torch
  semantics run;
- `executor(model, weights)`: the model region compiled for this backend: `new_cache(B, max_seq)`,
  `forward_on(cache, ForwardInputs, logits=True) -> .run() -> logits [B, T, V]` (with logits=False
  only the ops that write the cache run, and run() returns None: a prefill); `compiled(model, load)` returns
  the one this backend instance already built for a region with the same weights, ops and attributes
  (engines sharing a backend share device weights: a pipeline and its AR baseline), else builds it
  from `load()`;
- `prefill_quantum`: prefills are padded to a multiple of this many tokens (shapes a backend
  compiles per length);
- `captures`: whether device segments (and forwards a host op launches, StepContext.launch) are
  captured (CUDA graphs) and replayed; `warm(fn)` runs a
  segment eagerly the first time (where it will be captured), `capture(fn, pool) -> (replay,
  outputs)` records it (it must read and write only tensors; `outputs` is what fn returned while
  recording, the tensors every replay writes); a capturing backend runs both through
  `first_time(fn)`, which adds their seconds (kernel compilation, capture, the eager first run) to
  `setup_s`, so an engine reports them apart from decoding;
- `argmax(logits)` (int64, first index on ties), `top_log_probs(logits, k)` and `log_prob_of(logits,
  token)` (a drafter's ranking, specir/step/ranking.py's contract: a backend's kernels may order
  equal logits differently and round differently, never rank other tokens), `expand_tree(tree,
  level, vals, toks, feed)` and `tree_nodes(tree, pending)` (draft.tree's TreeState.expand and
  .nodes: a kernel writes the same tables and nodes) and
  `commit_path(state, path, n, compact)` (the accepted path's KV rows of a verifier moved into
  place: row lens + path[j] -> lens + j for j < n[b], path ascending) as torch ops a backend may
  replace by kernels.
"""
from __future__ import annotations

import time

import torch

from . import ranking


def compact_rows(cache_tensor: torch.Tensor, lens: torch.Tensor, path: torch.Tensor, n: torch.Tensor) -> None:
    """In place over [B, H, S, D]: row lens[b] + path[b, j] -> row lens[b] + j for j < n[b]; capture-safe."""
    B, H, S, D = cache_tensor.shape
    W = path.shape[1]
    j = torch.arange(W, device=path.device)[None, :]
    keep = j < n.long()[:, None]
    src = lens.long()[:, None] + torch.where(keep, path.long().clamp(min=0), j)
    dst = lens.long()[:, None] + j
    src, dst = src.clamp(max=S - 1), dst.clamp(max=S - 1)
    index = src[:, None, :, None].expand(B, H, W, D)
    rows = cache_tensor.gather(2, index)
    cache_tensor.scatter_(2, dst[:, None, :, None].expand(B, H, W, D), rows)


class StepBackend:
    name = "torch"
    captures = False
    prefill_quantum = 1  # prefill lengths are padded to a multiple of this (fewer forward shapes)

    def __init__(self, device):
        self.device = torch.device(device)
        self.setup_s = 0.0  # seconds of first-time work (warm-ups and captures) so far
        self._in_first_time = False

    @property
    def pads_packed_rows(self) -> bool:
        """Whether packed forwards run ragged.capacity(bound) rows (few forward sizes: a backend that
        captures or compiles per size) rather than exactly the bound (a pad row costs its compute)."""
        return self.captures

    def first_time(self, fn):
        """fn() (a warm-up or a capture), its seconds added to `setup_s`: the device is synchronised
        around the outermost such call (work nested in it is already counted; inside a CUDA graph
        capture begun elsewhere fn just runs)."""
        if self._in_first_time or self._capturing():
            return fn()
        self._synchronize()
        start, self._in_first_time = time.perf_counter(), True
        try:
            out = fn()
        finally:
            self._in_first_time = False  # (on an error: reset, no synchronise that could mask it)
        self._synchronize()
        self.setup_s += time.perf_counter() - start
        return out

    def _capturing(self) -> bool:
        return self.device.type == "cuda" and torch.cuda.is_current_stream_capturing()

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def executor(self, model, weights):  # pragma: no cover - every backend defines it
        raise NotImplementedError

    def compiled(self, model, load):
        """The executor of `model`, built once per region (the graph's mask type is not part of the key:
        the executor reads the mask each forward is given)."""
        cache = self.__dict__.setdefault("_executors", {})
        key = (model.name, model.weights, model.graph.ops, model.attrs)
        if key not in cache:
            cache[key] = self.executor(model, load())
        return cache[key]

    def release(self) -> None:
        """Forget the executors `compiled` built (their weights), for an engine being closed."""
        self.__dict__.pop("_executors", None)

    def argmax(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.float().argmax(dim=-1)

    def top_log_probs(self, logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return ranking.top_log_probs(logits, k)

    def log_prob_of(self, logits: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        return ranking.log_prob_of(logits, token)

    def expand_tree(self, tree, level: int, vals: torch.Tensor, toks: torch.Tensor, feed) -> None:
        tree.expand(level, vals, toks, feed)

    def tree_nodes(self, tree, pending: torch.Tensor):
        return tree.nodes(pending)

    def commit_path(self, state, path: torch.Tensor, n: torch.Tensor, compact: bool) -> None:
        if not compact:
            return
        cache = state.cache
        for layer in cache.k:
            k, v = cache.layer(layer)
            compact_rows(k, state.lens, path, n)
            compact_rows(v, state.lens, path, n)
        pos = cache.pos[:, None, :, None]
        compact_rows(pos, state.lens, path, n)

    def warm(self, fn):
        """Run `fn` eagerly before it is captured (a capturing backend runs it where it will capture)."""
        return fn()

    def capture(self, fn, pool):  # pragma: no cover - only capturing backends call it
        raise NotImplementedError

    def graph_pool(self):
        return None
