"""specir check: differential token testing (token forcing) against the declared target.

This process imports no plugin: it reads the declared target (guard/declared.py), chooses and
tokenizes the prompts, has a child process generate (guard/child.py: the only one that loads
--plugin files), then judges every token against the declared checkpoint (guard/judge.py).
"""
from __future__ import annotations

import json
import math
import sys

from ..errors import SpecirError
from ..guard import GuardRequest, run_guard
from ..guard.declared import declared_of
from ..importers import resolve_source
from ..importers.checkpoint import read_config
from ..importers.llama import max_position
from ..targets import get_target, host_target
from .common_run import add_source_options, positive, read_prompts


def register(sub) -> None:
    p = sub.add_parser("check", help="prove a pipeline's tokens by token forcing",
                       description="Generate with the pipeline (in a child process, the only one that loads "
                                   "plugins), then check every token against the pipeline's declared target "
                                   "checkpoint, loaded fresh (plain decoding, its declared dtype). Exit 0 only when "
                                   "every asked token was produced and passes; near-ties (reference logit gap <= "
                                   "tolerance) are counted and reported.")
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
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="fail when generation takes longer (default: no limit)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _reference_device(args) -> str:
    """The reference runs where the pipeline runs: on the GPU for a GPU target that this machine has."""
    from pathlib import Path

    from ..build_folder import is_build_folder, read_manifest
    name = args.target
    if args.source and Path(args.source).is_dir() and is_build_folder(Path(args.source)):
        name = read_manifest(Path(args.source)).get("target")
    target = get_target(name or host_target())
    if target.kind == "gpu":
        import torch
        if torch.cuda.is_available():
            return "cuda"
    return "cpu"


def run(args) -> int:
    positive("--max-new-tokens", args.max_new_tokens)
    positive("--batch-size", args.batch_size)
    if args.tolerance is not None and not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        raise SpecirError(f"--tolerance must be a finite number >= 0, got {args.tolerance}",
                          hint="a logit gap, e.g. --tolerance 0.01; leave it out for two ulps of the dtype")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise SpecirError(f"--timeout must be a number of seconds > 0, got {args.timeout}", hint="e.g. --timeout 600")
    from ..pipeline_template import default_spec_text
    default_text = default_spec_text()
    declared = declared_of(args.source, default_text)  # for the prompts; the judge reads it again itself
    folder = resolve_source(declared.source)
    config = read_config(folder)
    _, prompts = read_prompts(args, str(folder), int(config.get("vocab_size") or 0), max_position(config),
                              limit=args.limit or None)
    request = GuardRequest(args.source, prompts, args.max_new_tokens, target=args.target, passes=args.passes,
                           plugins=list(args.plugin or []), batch_size=args.batch_size, tolerance=args.tolerance,
                           reference=args.reference, device=_reference_device(args), timeout=args.timeout,
                           default_text=default_text)
    verdict = run_guard(request)
    declared = verdict.declared
    if args.json:
        print(json.dumps({**verdict.as_dict(), "prompts": len(prompts)}))
    else:
        status = "PASS" if verdict.ok else "FAIL"
        report = verdict.forcing
        checked = verdict.checked
        line = (f"{status}: {checked} of {verdict.asked} asked tokens checked over {len(prompts)} prompts against "
                f"@{declared.model} ({declared.source}, {verdict.meta.get('reference', 'not loaded')})")
        if report:
            line += (f"; {report['mismatches']} mismatches, {report['near_ties']} near-ties (tolerance "
                     f"{report['tolerance']})")
        print(line)
        for reason in verdict.reasons:
            print(f"  {reason}", file=sys.stderr)
        for s in report.get("sequences", []):
            for m in s["mismatches"][:3]:
                gap = "out of vocabulary" if m["gap"] is None else f"gap {m['gap']:.4f}"
                print(f"  prompt {s['index']}: token {m['position']}: pipeline gave {m['produced']}, reference "
                      f"{m['reference']} ({gap})", file=sys.stderr)
    return 0 if verdict.ok else 1
