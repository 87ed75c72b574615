"""Where continuous batching's time goes: prefill of joining requests against decode steps, and the
step time by live batch size, for a build and its AR pipeline on the same arrival schedule.

    python bench/arrivals_steps.py BUILD [--workload code-completion] [--slots 32] [--requests 48]
                                   [--max-new-tokens 96] [--json OUT.json]

Runs specir.runtime.arrivals.serve (what `specir bench --arrival-rate 0` times) for both engines
after the same warm-up, and the same prompts as one static batch through `generate` (what
`specir bench --batch-size` times), then prints per engine: busy, prefill and decode seconds,
steps, mean live batch, and the mean step time per live-size bucket.
"""
from __future__ import annotations

import argparse
import json
import statistics


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--workload", default="code-completion")
    ap.add_argument("--slots", type=int, default=32)
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--json")
    a = ap.parse_args(argv)

    from specir.runtime.arrivals import serve
    from specir.runtime.baseline import ar_pipeline
    from specir.runtime.session import open_session
    from specir.step.engine import StepEngine
    from specir.zoo import workloads
    from specir.zoo.tokenizer import load_tokenizer

    session = open_session(a.build, None, None)
    tok = load_tokenizer(session.target_folder() / "tokenizer.json")
    prompts = [tok.encode(r["prompt"]).ids for r in workloads.load(a.workload)[:a.requests]]
    engine = session.engine()
    ar = StepEngine(ar_pipeline(session.pipeline), engine.backend, base=session.base)
    out = {}
    for name, e in (("ar", ar), ("pipeline", engine)):
        serve(e, prompts[:a.slots], [0.0] * a.slots, 4, a.slots)  # warm, as arrivals.compare does
        run = serve(e, prompts, [0.0] * len(prompts), a.max_new_tokens, a.slots)
        live = run.live_per_step
        by_live = {}
        for n, sec in zip(live, run.step_seconds):
            by_live.setdefault(min(a.slots, -(-n // 8) * 8), []).append(sec)
        out[name] = {"busy_s": run.busy_s, "decode_s": run.decode_s, "prefill_s": run.busy_s - run.decode_s,
                     "setup_s": run.setup_s, "steps": len(live), "mean_live": statistics.mean(live),
                     "tokens": sum(len(t) for t in run.tokens),
                     "ms_per_step_by_live": {f"<={k}": [len(v), round(1e3 * statistics.mean(v), 3)]
                                             for k, v in sorted(by_live.items())}}
        static = e.generate(prompts[:a.slots], a.max_new_tokens)
        steps = max(len(r.accept_lengths) for r in static)
        out[name]["static"] = {**{k: round(v, 4) for k, v in e.timings.items()}, "steps": steps,
                               "decode ms/step": round(1e3 * e.timings["decode_s"] / steps, 3)}
    for name, r in out.items():
        print(f"{name:9s} busy {r['busy_s']:.3f} s = prefill {r['prefill_s']:.3f} + decode {r['decode_s']:.3f}; "
              f"steps {r['steps']}, mean live {r['mean_live']:.1f}, {r['tokens']} tokens, "
              f"decode ms/step {1e3 * r['decode_s'] / r['steps']:.2f}, setup {r['setup_s']:.2f} s; static {r['static']}")
        print(f"          [steps, ms/step] by live: {r['ms_per_step_by_live']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
