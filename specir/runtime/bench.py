"""Benchmarking a pipeline against its autoregressive baseline in the same engine and run.

Contract: `bench(engine, ar_engine, workloads, batch_sizes, max_new, progress=None, reference=None,
roofline=None)`
times, per workload and batch size, both warm engines (the same backend; sessions built and graphs
captured in an untimed warm-up at that batch size first) on the same batches (prompts repeated
to fill the last batch), and returns a BenchRow each:
- tokens/s and speedup of decoding (prefill excluded: what a serving engine's steady state
  sees), and end to end (prefill included);
- tau (tokens emitted per step), whether the outputs equal AR's token for token;
- with `reference` (a token_forcing.Reference of the declared target), every output of the timed
  run is token-forced: mismatches and near-ties (the figures are then proved, not assumed);
- milliseconds per decode step of both engines, and with `roofline` (step_roofline.step_roofline:
  the seconds of one AR step of `batch` requests at `context` cached tokens, or None) the AR step
  against it: each timed AR step priced at its batch's mean context (prompt plus half the tokens
  each request generated; exact at batch 1 and where a batch's requests finish together).
Requests of a batch finish at different times; finished ones stop committing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class BenchRow:
    workload: str
    batch_size: int
    prompts: int
    tokens: int
    ar_tokens_per_s: float
    tokens_per_s: float
    speedup: float
    ar_e2e_tokens_per_s: float
    e2e_tokens_per_s: float
    e2e_speedup: float
    tau: float
    agree_with_ar: float
    mismatches: int | None = None
    near_ties: int | None = None
    step_ms: float | None = None
    ar_step_ms: float | None = None
    ar_roofline_ms: float | None = None

    @property
    def ar_x_roofline(self) -> float | None:
        if self.ar_step_ms is None or not self.ar_roofline_ms:
            return None
        return self.ar_step_ms / self.ar_roofline_ms

    def as_dict(self) -> dict:
        return {**asdict(self), "ar_x_roofline": self.ar_x_roofline}


def _batches(items, size):
    items, i = list(items), 0
    while len(items) % size:
        items.append(items[i])
        i += 1
    return [items[i:i + size] for i in range(0, len(items), size)]


def _timed(engine, batches, max_new, progress, roofline=None):
    """(outputs, decode s, prefill + decode s, tokens, decode steps, roofline s of those steps or None)."""
    outs, decode_s, e2e_s, tokens, steps, roof_s = [], 0.0, 0.0, 0, 0, 0.0
    for batch in batches:
        results = engine.generate(batch, max_new)
        decode_s += engine.timings["decode_s"]
        e2e_s += engine.timings["decode_s"] + engine.timings["prefill_s"]
        tokens += sum(len(r.tokens) for r in results)
        steps += engine.timings["steps"]
        if roofline is not None and roof_s is not None:
            context = sum(len(p) + len(r.tokens) / 2 for p, r in zip(batch, results)) / len(batch)
            step_s = roofline(len(batch), context)
            roof_s = None if step_s is None else roof_s + engine.timings["steps"] * step_s
        outs += results
        if progress:
            progress(len(batch))
    return outs, decode_s, e2e_s, tokens, steps, roof_s if roofline is not None else None


WARM_UP_TOKENS = 8


def warm_up(engine, prompts, batch_size: int, max_new: int, *, temperature: float = 0.0, seed: int = 0) -> float:
    """Build the session of this batch size (room for the longest prompt and `max_new` tokens) and
    generate WARM_UP_TOKENS in it (output dropped, same sampling mode), so kernels a first step
    compiles, captured or not, and its graphs are built before anything is timed. Returns the
    warm-up's prefill and decode seconds (its warm-ups and captures are in engine.setup_s)."""
    longest = max(prompts, key=len)
    engine.session(batch_size, engine.rows_needed(len(longest), max_new), temperature > 0)
    engine.generate([longest] * batch_size, min(max_new, WARM_UP_TOKENS), temperature=temperature, seed=seed)
    return engine.timings["prefill_s"] + engine.timings["decode_s"]


def bench(engine, ar_engine, workloads: dict[str, list[list[int]]], batch_sizes: list[int], max_new: int,
          progress=None, reference=None, roofline=None) -> list[BenchRow]:
    from .token_forcing import force
    everything = [p for prompts in workloads.values() for p in prompts]
    for bs in batch_sizes:
        warm_up(ar_engine, everything, bs, max_new)
        warm_up(engine, everything, bs, max_new)
    rows = []
    for name, prompts in workloads.items():
        for bs in batch_sizes:
            batches = _batches(prompts, bs)
            ar_out, ar_s, ar_e2e, ar_tok, ar_steps, ar_roof_s = _timed(ar_engine, batches, max_new, progress,
                                                                       roofline)
            out, s, e2e, tok, engine_steps, _ = _timed(engine, batches, max_new, progress)
            steps = sum(len(r.accept_lengths) for r in out)
            agree = sum(a.tokens == b.tokens for a, b in zip(out, ar_out)) / max(len(out), 1)
            row = BenchRow(name, bs, len(prompts), tok, ar_tok / ar_s, tok / s, (tok / s) / (ar_tok / ar_s),
                           ar_tok / ar_e2e, tok / e2e, (tok / e2e) / (ar_tok / ar_e2e), tok / max(steps, 1), agree,
                           step_ms=_per_step_ms(s, engine_steps), ar_step_ms=_per_step_ms(ar_s, ar_steps),
                           ar_roofline_ms=None if ar_roof_s is None else _per_step_ms(ar_roof_s, ar_steps))
            if reference is not None:
                flat = [p for b in batches for p in b]
                report = force(reference, flat, [r.tokens for r in out])
                row.mismatches, row.near_ties = report.mismatches, report.near_ties
            rows.append(row)
    return rows


def format_table(rows: list[BenchRow]) -> str:
    checked = any(r.mismatches is not None for r in rows)
    lines = ["| workload | batch | prompts | AR tok/s | tok/s | speedup | e2e speedup | tau | = AR | AR ms/step | "
             "AR x roofline | ms/step |" + (" mismatches |" if checked else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if checked else "")]
    for r in rows:
        x_roof = "-" if r.ar_x_roofline is None else f"{r.ar_x_roofline:.2f}x"
        lines.append(f"| {r.workload} | {r.batch_size} | {r.prompts} | {r.ar_tokens_per_s:.1f} | "
                     f"{r.tokens_per_s:.1f} | {r.speedup:.2f}x | {r.e2e_speedup:.2f}x | {r.tau:.2f} | "
                     f"{r.agree_with_ar:.0%} | {_ms(r.ar_step_ms)} | {x_roof} | {_ms(r.step_ms)} |"
                     + (f" {r.mismatches} |" if checked else ""))
    return "\n".join(lines)


def _per_step_ms(seconds: float, steps: int) -> float | None:
    return 1e3 * seconds / steps if steps else None


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


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
    for ax, title in zip(axes, ("decode speedup over AR", "mean accepted length (tau)")):
        ax.set_xticks([j + width * (len(sizes) - 1) / 2 for j in range(len(workloads))])
        ax.set_xticklabels(workloads, rotation=20)
        ax.set_title(title)
        ax.legend()
    axes[0].axhline(1.0, color="gray", lw=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
