"""A search's outputs in `--out`: report.json, report.md, progress.png and best.spec.

Contract: `write(out, summary)` (re)writes all four atomically from what has finished so far (the
search calls it after every candidate, and on Ctrl-C), so the folder always holds a consistent
report. report.json: `baseline` and `best` (speedup, tau, tokens_per_s, pipeline), `candidates`
(by index: pipeline, predicted and measured speedup, tau, the guard's verdict, seconds and
the seconds of each stage (`stages`: compile, guard, timing, forcing), status; the
best-so-far curve is in the order they finished), and the cost
model's accuracy (`rank_correlation`: Spearman's rho of predicted vs measured speedup over the
validated candidates) and gap report. best.spec is the best validated pipeline's final IR with its
pass pipeline in a comment.
"""
from __future__ import annotations

import json
import os
from pathlib import Path


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else None


def candidate_row(r: dict) -> dict:
    m, p = r.get("measured") or {}, r.get("predicted") or {}
    return {"index": r["index"], "pipeline": r["passes"], "origin": r["origin"], "status": r["status"],
            "predicted_speedup": p.get("speedup"), "predicted_tau": p.get("tau"),
            "measured_speedup": m.get("speedup"), "tau": m.get("tau"), "tokens_per_s": m.get("tokens_per_s"),
            "ar_tokens_per_s": m.get("ar_tokens_per_s"), "verdict": r.get("verdict"),
            "timed_forcing": r.get("timed_forcing"), "seconds": r.get("seconds"), "stages": r.get("stages"),
            "ir_digest": r.get("ir_digest"),
            "plugins": r.get("plugins"), "error": (r.get("error") or "")[:2000] or None, "kept": r.get("kept", False),
            "sandbox": r.get("sandbox")}


def summarise(records: list[dict]) -> dict:
    validated = [r for r in records if r["status"] == "validated"]
    pairs = [(r["predicted"]["speedup"], r["measured"]["speedup"]) for r in validated if r.get("predicted")]
    best_so_far, best, curve = 0.0, None, []
    for r in records:
        if r["status"] == "validated" and (best is None or r["measured"]["speedup"] > best["measured"]["speedup"]):
            best = r
        best_so_far = best["measured"]["speedup"] if best else 0.0
        curve.append(best_so_far)
    return {"validated": validated, "best": best, "curve": curve,
            "rank_correlation": spearman([a for a, _ in pairs], [b for _, b in pairs]) if pairs else None}


def write(out: Path, meta: dict, records: list[dict], best_ir: str | None, interrupted: bool = False) -> dict:
    s = summarise(records)
    best = s["best"]
    ar = [r["measured"]["ar_tokens_per_s"] for r in s["validated"]]
    baseline = {"pipeline": "autoregressive decoding of the declared target", "speedup": 1.0, "tau": 1.0,
                "tokens_per_s": sorted(ar)[len(ar) // 2] if ar else None}
    best_obj = None
    if best:
        m = best["measured"]
        best_obj = {"pipeline": best["passes"], "speedup": m["speedup"], "tau": m["tau"],
                    "tokens_per_s": m["tokens_per_s"], "ar_tokens_per_s_same_rounds": m["ar_tokens_per_s"],
                    "index": best["index"], "ir_digest": best["ir_digest"],
                    "plugins": best.get("plugins") or []}
    report = {**meta, "interrupted": interrupted,
              "evaluations": sum(1 for r in records if r["status"] != "duplicate"), "baseline": baseline, "best": best_obj,
              "rank_correlation": s["rank_correlation"], "best_speedup_by_evaluation": s["curve"],
              "candidates": [candidate_row(r) for r in sorted(records, key=lambda r: r["index"])]}
    _atomic(out / "report.json", json.dumps(report, indent=1, default=str) + "\n")
    _atomic(out / "report.md", markdown(report))
    if best_ir is not None and best_obj is not None:
        header = (f"// specir search: best of {len(records)} evaluations, {best_obj['speedup']:.3f}x over AR, "
                  f"tau {best_obj['tau']:.2f}, {best_obj['tokens_per_s']:.1f} tok/s on {meta.get('target')}\n"
                  f"// pass pipeline: {best_obj['pipeline'] or '(none)'}\n"
                  + (f"// plugins: {', '.join(best_obj['plugins'])}\n" if best_obj["plugins"] else ""))
        _atomic(out / "best.spec", header + best_ir)
    plot(out / "progress.png", s["curve"])
    return report


def _f(x, fmt="{:.2f}"):
    return "" if x is None else fmt.format(x)


def markdown(r: dict) -> str:
    lines = [f"# specir search: {r.get('spec')} on {r.get('target')}", ""]
    lines.append(f"- deployment: `{json.dumps(r.get('deployment'))}`")
    lines.append(f"- evaluations: {r['evaluations']} (budget {r.get('budget')})" + (" - interrupted" if r["interrupted"] else ""))
    b = r["best"]
    if b:
        lines.append(f"- best: `{b['pipeline'] or '(no passes)'}`: **{b['speedup']:.3f}x** over AR, tau {b['tau']:.2f}, "
                     f"{b['tokens_per_s']:.1f} tok/s (AR in the same rounds: {b['ar_tokens_per_s_same_rounds']:.1f})")
    lines.append(f"- baseline (AR) tokens/s, median over candidates' rounds: {_f(r['baseline']['tokens_per_s'], '{:.1f}')}")
    rho = r.get("rank_correlation")
    lines.append(f"- cost model accuracy: Spearman rho of predicted vs measured speedup = {_f(rho)}")
    gap = r.get("gap") or {}
    if gap:
        lines.append(f"- biggest gap of the input pipeline (cost model): **{gap.get('biggest')}** "
                     f"(predicted {gap.get('predicted_speedup', 0):.2f}x; with each limit lifted: "
                     + ", ".join(f"{k} {v:.2f}x" for k, v in (gap.get("with_limit_lifted") or {}).items()) + ")")
    sb = r.get("sandbox") or {}
    if sb:
        lines.append(f"- sandbox on this machine: writes confined {sb.get('writes_confined')}, network "
                     f"{sb.get('network')}, signals scoped {sb.get('signals_scoped')}, PID namespace "
                     f"{sb.get('pid_namespace')}; notes: {'; '.join(sb.get('notes') or []) or 'none'}")
    for note in r.get("notes") or []:
        lines.append(f"- note: {note}")
    lines += ["", "| # | pipeline | origin | status | predicted | measured | tau | tok/s | guard | s |",
              "|---:|---|---|---|---:|---:|---:|---:|---|---:|"]
    for c in r["candidates"]:
        v = c.get("verdict") or {}
        guard = ("pass" if v.get("ok") else f"FAIL ({v.get('mismatches')} mismatches)") if v else ""
        lines.append(f"| {c['index']} | `{c['pipeline'] or '(none)'}` | {c['origin']} | {c['status']}"
                     f"{' (kept)' if c.get('kept') else ''} | {_f(c['predicted_speedup'])} | "
                     f"{_f(c['measured_speedup'], '{:.3f}')} | {_f(c['tau'])} | {_f(c['tokens_per_s'], '{:.1f}')} | "
                     f"{guard} | {_f(c['seconds'], '{:.0f}')} |")
    return "\n".join(lines) + "\n"


def plot(path: Path, curve: list[float]) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.step(range(1, len(curve) + 1), curve, where="post")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xlabel("evaluations")
    ax.set_ylabel("best speedup over AR")
    ax.set_title("specir search: best validated speedup")
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return True
