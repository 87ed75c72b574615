"""The decode step on the Triton backend: model regions as CompiledModels (Triton launches, and
cuBLAS where the IR's gemm policy says), the step's device segments captured as CUDA graphs on a
GPU (run eagerly under TRITON_INTERPRET=1, on a CPU or a GPU: the interpreter copies through the
host), and as Triton kernels: argmax, a drafter's ranking (kernels/ranking.py), draft.tree's
expansion and nodes (kernels/tree_expand.py, tree_nodes.py), greedy acceptance, KV compaction.
Importing this module registers the Triton lowerings of step ops (step_kernels.py)."""
from __future__ import annotations

import torch

from specir.errors import SpecirError
from specir.step.backend import StepBackend

from . import step_kernels  # noqa: F401  (registers the ops' "triton" lowerings)
from .compiled_model import CompiledModel, concrete_device
from .kernels._interpreter_compat import interpreting
from .kernels import ranking, tree_expand
from .kernels import tree_nodes as tree_nodes_kernel
from .kernels.argmax import argmax
from .kernels.kv_cache import kv_compact


class TritonStepBackend(StepBackend):
    name = "triton"
    pads_packed_rows = True  # kernels compile (and graphs capture) per forward size: keep the sizes few
    # the kernel behind each hook below (a build's manifest lists those of the hooks its ops call)
    hook_kernels = {"top_log_probs": "ranking.top_log_probs", "log_prob_of": "ranking.log_prob_of",
                    "expand_tree": "tree_expand.expand_tree", "tree_nodes": "tree_nodes.tree_nodes"}

    def __init__(self, device):
        device = concrete_device(device)
        if device.type != "cuda" and not interpreting():
            raise SpecirError(f"the triton backend runs on CUDA devices, not {device.type!r}",
                              hint="use a GPU target, or set TRITON_INTERPRET=1 to run its kernels in Triton's "
                                   "CPU interpreter (slow; for tests)")
        super().__init__(device)
        # the interpreter runs kernels on the host (copies to and from the device): nothing to capture
        self.captures = device.type == "cuda" and not interpreting()
        if self.captures:
            from .kernels.linear import _counter_buffer
            # the linear kernels' split-K counters: grown once now, since a captured graph keeps their address
            _counter_buffer(self.device, 1 << 20)
            self.stream = torch.cuda.Stream(self.device)  # warm-ups and captures run here (per-stream lazy state)

    @property
    def prefill_quantum(self) -> int:
        """Prefills pad to multiples of 32 tokens on a GPU (kernels compile per forward size); the interpreter
        compiles nothing and pays per token (a 9-token prompt ran as 32), so it pads nothing."""
        return 1 if interpreting() else 32

    def executor(self, model, weights):
        return CompiledModel(model, weights, self.device)

    def argmax(self, logits: torch.Tensor) -> torch.Tensor:
        return argmax(logits.contiguous())

    def top_log_probs(self, logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not ranking.fits(logits.shape[-1], k):
            return super().top_log_probs(logits, k)
        return ranking.top_log_probs(logits, k)

    def log_prob_of(self, logits: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        return ranking.log_prob_of(logits, token)

    def expand_tree(self, tree, level: int, vals: torch.Tensor, toks: torch.Tensor, feed) -> None:
        if not tree_expand.fits(tree):
            return super().expand_tree(tree, level, vals, toks, feed)
        tree_expand.expand_tree(tree, level, vals, toks, feed)

    def tree_nodes(self, tree, pending: torch.Tensor):
        if not tree_nodes_kernel.fits(tree):
            return super().tree_nodes(tree, pending)
        return tree_nodes_kernel.tree_nodes(tree, pending)

    def commit_path(self, state, path, n, compact: bool) -> None:
        if not compact:
            return
        for k_stack, v_stack in state.cache.stacks:  # one launch per shape of layer (KVCache.stacks)
            kv_compact(k_stack, v_stack, state.lens, path, n)

    def graph_pool(self):
        return torch.cuda.graph_pool_handle()

    def warm(self, fn):
        """Run `fn` eagerly on the capture stream (cuBLAS workspaces and other per-stream state exist
        before the capture), ordered with the current stream; counted in `setup_s`."""
        return self.first_time(lambda: self._warm(fn))

    def capture(self, fn, pool):
        """Record `fn` into a CUDA graph in `pool` on the capture stream; counted in `setup_s`."""
        return self.first_time(lambda: self._capture(fn, pool))

    def _warm(self, fn):
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            out = fn()
        current.wait_stream(self.stream)
        return out

    def _capture(self, fn, pool):
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool, stream=self.stream):
            outputs = fn()
        current.wait_stream(self.stream)
        return graph.replay, outputs
