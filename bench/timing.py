"""The benchmarks' timer (bench/gpu_bench.py, bench/hybrid_bench.py): milliseconds per call by CUDA
events on a GPU (the median of three rounds of `reps` calls, after one warm-up call), wall time off
one; CUDA-graph capture of a call; and `replay_us`, a call's microseconds as a captured graph's replay
(bench/recurrent_tree_kernels.py, bench/draft_step_kernels.py)."""
from __future__ import annotations

import statistics
import time

import torch


class Clock:
    """Milliseconds per call of `fn` (CUDA events on a GPU). `fake` (smoke test) calls once."""

    def __init__(self, device: str, reps: int, fake: bool = False):
        self.cuda, self.reps, self.fake = device.startswith("cuda"), reps, fake

    def ms(self, fn, reps: int | None = None) -> float:
        if self.fake:
            fn()
            return 1.0
        reps = reps or self.reps
        fn()
        if not self.cuda:
            t = time.perf_counter()
            for _ in range(reps):
                fn()
            return (time.perf_counter() - t) * 1e3 / reps
        torch.cuda.synchronize()
        samples = []
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / reps)
        return sorted(samples)[1]

    def graph(self, fn, pool=None):
        """A replay function of `fn` captured as a CUDA graph (`fn` itself off a GPU)."""
        if not self.cuda:
            return fn
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            fn()

        def replay():
            g.replay()
        replay.graph = g  # the graph lives as long as its replay function
        return replay


def replay_us(fn, reps: int = 50, rounds: int = 5) -> float | None:
    """Microseconds per call of `fn` captured as a CUDA graph (two eager warm-up calls on the capture
    stream first): the median of `rounds` rounds of `reps` replays. Off a GPU: calls fn once, None."""
    if not torch.cuda.is_available():
        fn()
        return None
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    out = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / reps)
    return round(statistics.median(out) * 1e3, 2)
