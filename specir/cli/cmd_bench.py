"""specir bench: speedup over autoregressive decoding, tau and tokens/s per workload and batch size."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from ..build_folder import atomic_write_text
from ..calibration import calibration
from ..errors import SpecirError
from ..runtime.baseline import ar_pipeline
from ..runtime.bench import bench, format_table, plot
from ..runtime.memory import check_batch_fits, weight_bytes
from ..runtime.step_roofline import step_roofline
from ..step.engine import StepEngine
from .common_run import add_source_options, positive, prompts_from, session_from


def register(sub) -> None:
    p = sub.add_parser("bench", help="measure speedup, tau and tokens/s",
                       description="Time the pipeline and autoregressive decoding of its stock target in the same "
                                   "engine, per workload and batch size. Prints a table; writes JSON and a PNG plot.")
    add_source_options(p)
    p.add_argument("--workload", help="a shipped workload (default: all)")
    p.add_argument("--prompts", metavar="FILE.jsonl", help="benchmark these prompts instead of a workload")
    p.add_argument("--batch-size", default="1", help="batch sizes, comma-separated (default 1)")
    p.add_argument("--limit", type=int, default=8, help="prompts per workload (default 8)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--out", default="bench-results", help="folder for bench.json and bench.png")
    p.add_argument("--check", action="store_true",
                   help="token-force every timed output against the declared target (adds its forwards after timing)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    p.add_argument("--arrival-rate", metavar="R[,R2]",
                   help="continuous batching: requests arrive as a Poisson process of R per second and join a "
                        "running batch of --batch-size slots (comma-separated rates; 0: all at once)")
    p.add_argument("--seed", type=int, default=0, help="the arrival schedule's seed (with --arrival-rate)")
    p.set_defaults(func=run)


def run(args) -> int:
    positive("--max-new-tokens", args.max_new_tokens)
    sizes = _batch_sizes(args.batch_size)
    rates = None if args.arrival_rate is None else _rates(args.arrival_rate)
    out = _out_folder(args.out)
    session = session_from(args)
    records, prompts = prompts_from(args, session, limit=args.limit or None)
    workloads: dict[str, list] = {}
    for rec, ids in zip(records, prompts):
        workloads.setdefault(rec.get("workload", "prompts"), []).append(ids)
    check_batch_fits(session.pipeline, max(sizes), max(len(p) for p in prompts), args.max_new_tokens, session.device,
                     backend=session.backend, resident=weight_bytes(session.pipeline, reference=args.check))
    # the AR roofline's rates, measured before any weights load (their buffers are then free to take)
    measured = calibration(session.target) if rates is None else None   # cached per machine
    print(f"bench: loading {session.pipeline.name} on {session.backend} ({session.target.name}); kernels and graphs "
          "are built at the first step of each batch size", file=sys.stderr, flush=True)
    engine = session.engine()
    ar_engine = StepEngine(ar_pipeline(session.pipeline), engine.backend, base=session.base)
    reference = None
    if args.check:
        print("bench: loading the declared target for --check", file=sys.stderr, flush=True)
        from ..declared_target import read
        from ..runtime.token_forcing import Reference
        reference = Reference(read(session.pipeline), session.device)
    if rates is not None:
        return _run_arrivals(args, session, engine, ar_engine, workloads, sizes, rates, out,
                             reference)
    total = 2 * sum(len(v) + (-len(v)) % bs for v in workloads.values() for bs in sizes)
    bar = _progress(total)
    roofline = step_roofline(ar_engine.pipeline.model(ar_engine.target), session.target, measured.bandwidth,
                             measured.flops)
    rows = bench(engine, ar_engine, workloads, sizes, args.max_new_tokens, progress=bar.update if bar else None,
                 reference=reference, roofline=roofline)
    if bar:
        bar.close()
    meta = {"source": args.source or "<default zoo pair>", "target": session.target.name,
            "backend": session.backend, "max_new_tokens": args.max_new_tokens,
            "setup_s": {"pipeline": round(engine.setup_s, 3), "ar": round(ar_engine.setup_s, 3)},
            "timing": "tokens_per_s and speedup: decoding (prefill excluded); e2e_*: prefill included",
            "measured": {"copy_bandwidth_Bps": measured.bandwidth, "matmul_flops": measured.flops},
            "roofline": "ar_roofline_ms: the AR step's bytes (the weights a forward reads, KV at the batch's mean "
                        "context) over the measured copy bandwidth, or its FLOPs over the measured matmul rate "
                        "where slower (specir calibrate)"}
    atomic_write_text(out / "bench.json", json.dumps({**meta, "rows": [r.as_dict() for r in rows]}, indent=2) + "\n")
    plotted = plot(rows, out / "bench.png")
    if args.json:
        print(json.dumps({**meta, "rows": [r.as_dict() for r in rows]}))
    else:
        print(format_table(rows))
        if any(r.ar_x_roofline is not None for r in rows):
            print(f"AR x roofline: the AR step against its bytes at this machine's copy bandwidth "
                  f"({measured.bandwidth / 1e9:.0f} GB/s, specir calibrate)", file=sys.stderr)
        print(f"wrote {out / 'bench.json'}" + (f" and {out / 'bench.png'}" if plotted else ""), file=sys.stderr)
    return 0


def _rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        rates = []
    if not rates or any(not 0 <= r < float("inf") for r in rates):
        raise SpecirError(f"--arrival-rate must be comma-separated rates >= 0 (requests per second), got {text!r}",
                          hint="e.g. --arrival-rate 2,8 (0: every request arrives at once)")
    return rates


def _run_arrivals(args, session, engine, ar_engine, workloads, sizes, rates, out, reference) -> int:
    from ..runtime.arrivals import compare, format_rows
    rows = [compare(engine, ar_engine, prompts, rate, bs, args.max_new_tokens, workload=name, seed=args.seed,
                    reference=reference)
            for name, prompts in workloads.items() for rate in rates for bs in sizes]
    meta = {"source": args.source or "<default zoo pair>", "target": session.target.name,
            "backend": session.backend, "max_new_tokens": args.max_new_tokens, "mode": "poisson arrivals",
            "timing": "tokens_per_s: tokens over busy seconds (prefill and steps; idle gaps skipped; first-time "
                      "captures off the clock, in setup_s); latency: arrival to last token on that clock"}
    payload = {**meta, "rows": [r.as_dict() for r in rows]}
    atomic_write_text(out / "bench.json", json.dumps(payload, indent=2) + "\n")
    if args.json:
        print(json.dumps(payload))
    else:
        print(format_rows(rows))
        print(f"wrote {out / 'bench.json'}", file=sys.stderr)
    return 0


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise SpecirError(f"--batch-size must be comma-separated integers, got {text!r}",
                          hint="e.g. --batch-size 1,4") from None
    if not sizes:
        raise SpecirError("--batch-size names no batch size", hint="e.g. --batch-size 1,4")
    return [positive("--batch-size", b) for b in sizes]


def _out_folder(path: str) -> Path:
    """Create --out before any timing, so a bad folder fails at once, not after the run."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise SpecirError(f"--out {path!r} is a file, not a folder", path=str(path),
                          hint="give --out a folder name (e.g. bench-results/)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecirError(f"cannot create --out folder {path!r}: {exc.strerror}", path=str(path),
                          hint="choose an --out whose parent folders exist and are writable") from None
    for name in ("bench.json", "bench.png"):
        target = out / name
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise SpecirError(f"--out {path!r}: {name} there is not a regular file", path=str(target),
                              hint=f"move {name} away, or choose another --out")
    try:  # writable? (a read-only folder or file system fails here, before the timing)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise SpecirError(f"cannot write into --out folder {path!r}: {exc.strerror}", path=str(path),
                          hint="choose an --out folder you can write") from None
    return out


def _progress(total: int):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    tty = sys.stderr.isatty()  # a log file gets a line every 30 s instead of a redrawn bar
    return tqdm(total=total, desc="bench", unit="prompt", file=sys.stderr, mininterval=0.1 if tty else 30,
                ncols=None if tty else 100)
