"""specir check: differential token testing (token forcing) against plain decoding of the target."""
from __future__ import annotations

import json
import math
import sys

from ..errors import SpecirError
from ..runtime.token_forcing import Reference, force
from .common_run import add_source_options, positive, prompts_from, session_from


def register(sub) -> None:
    p = sub.add_parser("check", help="prove a pipeline's tokens by token forcing",
                       description="Generate with the pipeline, then check every token against the stock target "
                                   "(plain decoding, same dtype). Exit 0 only when every token passes; near-ties "
                                   "(reference logit gap <= tolerance) are counted and reported.")
    add_source_options(p)
    p.add_argument("--prompts", metavar="FILE.jsonl", help='prompts: one {"prompt": ...} or {"prompt_ids": [...]} '
                                                          "per line (default: the shipped workloads)")
    p.add_argument("--workload", help="a shipped workload (default: all of them)")
    p.add_argument("--limit", type=int, default=5, help="prompts per workload / from the file (default 5; 0 = all)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--tolerance", type=float, help="a fixed near-tie logit gap (default: two ulps of the dtype at the largest logit)")
    p.add_argument("--reference", choices=("auto", "transformers", "ir"), default="auto",
                   help="the stock reference: transformers (default when it loads the checkpoint) or the "
                        "freshly imported IR graph")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    positive("--max-new-tokens", args.max_new_tokens)
    positive("--batch-size", args.batch_size)
    if args.tolerance is not None and not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        raise SpecirError(f"--tolerance must be a finite number >= 0, got {args.tolerance}",
                          hint="a logit gap, e.g. --tolerance 0.01; leave it out for two ulps of the dtype")
    session = session_from(args)
    _, prompts = prompts_from(args, session, limit=args.limit or None)
    engine = session.engine()
    outputs = []
    for i in range(0, len(prompts), args.batch_size):
        outputs += [r.tokens for r in engine.generate(prompts[i:i + args.batch_size], args.max_new_tokens)]
    from ..runtime.baseline import target_name
    target = session.pipeline.model(target_name(session.pipeline))
    reference = Reference(target, session.target_folder(), session.device, args.reference)
    report = force(reference, prompts, outputs, args.tolerance)
    if args.json:
        print(json.dumps({**report.as_dict(), "prompts": len(prompts), "backend": session.backend,
                          "target": session.target.name}))
    else:
        status = "PASS" if report.ok else "FAIL"
        print(f"{status}: {report.checked} tokens checked over {len(prompts)} prompts against {reference.kind}; "
              f"{report.mismatches} mismatches, {report.near_ties} near-ties (tolerance {report.tolerance})")
        for s in report.sequences:
            for m in s.mismatches[:3]:
                print(f"  prompt {s.index}: token {m['position']}: pipeline gave {m['produced']}, reference "
                      f"{m['reference']} (gap {m['gap']:.4f})", file=sys.stderr)
    return 0 if report.ok else 1
