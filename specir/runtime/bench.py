"""Benchmarking a pipeline against its autoregressive baseline in the same engine and run.

For each workload and batch size: tokens/s of the pipeline and of AR decoding (same backend,
same device, stock target weights), speedup, mean accepted length (tau: tokens emitted per
target forward), and whether the greedy outputs equal AR's token for token.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from .baseline import ar_pipeline
from .engine import Engine


@dataclass
class BenchRow:
    workload: str
    batch_size: int
    prompts: int
    tokens: int
    ar_tokens_per_s: float
    tokens_per_s: float
    speedup: float
    tau: float
    agree_with_ar: float

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _batches(items, size):
    items, i = list(items), 0
    while len(items) % size:
        items.append(items[i])
        i += 1
    return [items[i:i + size] for i in range(0, len(items), size)]


def _timed(engine: Engine, batches, max_new, progress):
    outs, seconds, tokens = [], 0.0, 0
    for batch in batches:
        start = time.perf_counter()
        results = engine.generate(batch, max_new)
        seconds += time.perf_counter() - start
        tokens += sum(len(r.tokens) for r in results)
        outs += results
        if progress:
            progress(len(batch))
    return outs, seconds, tokens


def bench(engine: Engine, make_engine, workloads: dict[str, list[list[int]]], batch_sizes: list[int],
          max_new: int, progress=None) -> list[BenchRow]:
    """`make_engine(pipeline, weights)` builds an engine of the same backend for the baseline."""
    ar = make_engine(ar_pipeline(engine.pipeline))
    warm = next(iter(workloads.values()))[:1]
    engine.generate(warm, 4)
    ar.generate(warm, 4)
    rows = []
    for name, prompts in workloads.items():
        for bs in batch_sizes:
            batches = _batches(prompts, bs)
            ar_out, ar_s, ar_tok = _timed(ar, batches, max_new, progress)
            out, s, tok = _timed(engine, batches, max_new, progress)
            steps = sum(len(r.accept_lengths) for r in out)
            agree = sum(a.tokens == b.tokens for a, b in zip(out, ar_out)) / max(len(out), 1)
            rows.append(BenchRow(name, bs, len(prompts), tok, ar_tok / ar_s, tok / s, (tok / s) / (ar_tok / ar_s),
                                 tok / max(steps, 1), agree))
    return rows


def format_table(rows: list[BenchRow]) -> str:
    lines = ["| workload | batch | prompts | AR tok/s | tok/s | speedup | tau | = AR |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.workload} | {r.batch_size} | {r.prompts} | {r.ar_tokens_per_s:.1f} | "
                     f"{r.tokens_per_s:.1f} | {r.speedup:.2f}x | {r.tau:.2f} | {r.agree_with_ar:.0%} |")
    return "\n".join(lines)


def plot(rows: list[BenchRow], path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    workloads = list(dict.fromkeys(r.workload for r in rows))
    sizes = list(dict.fromkeys(r.batch_size for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / max(len(sizes), 1)
    for i, bs in enumerate(sizes):
        xs = [j + i * width for j in range(len(workloads))]
        by = {r.workload: r for r in rows if r.batch_size == bs}
        axes[0].bar(xs, [by[w].speedup if w in by else 0 for w in workloads], width, label=f"batch {bs}")
        axes[1].bar(xs, [by[w].tau if w in by else 0 for w in workloads], width, label=f"batch {bs}")
    for ax, title in zip(axes, ("speedup over AR", "mean accepted length (tau)")):
        ax.set_xticks([j + width * (len(sizes) - 1) / 2 for j in range(len(workloads))])
        ax.set_xticklabels(workloads, rotation=20)
        ax.set_title(title)
        ax.legend()
    axes[0].axhline(1.0, color="gray", lw=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
