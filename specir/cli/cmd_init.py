"""specir init: write a ready pipeline for given checkpoints (to stdout)."""
from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from ..errors import SpecirError
from ..importers import resolve_source
from ..importers.tokenizer_match import check_same_tokenizer
from ..ir.printer import print_pipeline
from ..load import load_pipeline
from ..pass_manager import PassManager
from ..pass_pipeline import build_passes


def register(sub) -> None:
    p = sub.add_parser("init", help="write a ready pipeline for the given checkpoints",
                       description="Write a pipeline (canonical IR, models expanded) to stdout. With no "
                                   "--target-model, the shipped zoo pair.")
    p.add_argument("--target-model", metavar="DIR", help="target checkpoint folder (default: the zoo target)")
    p.add_argument("--drafter", metavar="DIR|ngram",
                   help="draft checkpoint folder, or 'ngram' for prompt lookup (default: the zoo drafter with "
                        "the zoo target, else ngram)")
    p.add_argument("--draft", choices=("chain", "tree"), default="chain", help="draft shape (default chain)")
    p.add_argument("--k", type=int, default=4, help="drafted tokens per step for chains, depth for trees")
    p.add_argument("--budget", type=int, default=32, help="tree: drafted nodes per step")
    p.add_argument("--topk", type=int, default=4, help="tree: children per node")
    p.add_argument("--name", help="pipeline name (default: from the target folder)")
    p.set_defaults(func=run)


def pipeline_text(name: str, target: str, drafter: str, k: int) -> str:
    if drafter == "ngram":
        models = f'  model @target = import({_q(target)})\n'
        draft = f"    %draft = draft.ngram %ctx {{k = {k}}}\n"
    else:
        models = f'  model @target = import({_q(target)})\n  model @drafter = import({_q(drafter)})\n'
        draft = f"    %draft = draft.chain @drafter, %ctx {{k = {k}}}\n"
    return (f"pipeline {name} {{\n{models}  step(%ctx: context) {{\n{draft}"
            "    %logits = verify.chain @target, %ctx, %draft\n"
            "    %accepted = accept.sample %draft, %logits\n"
            "    commit %ctx, %accepted\n  }\n}\n")


def _q(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _source(path: str) -> str:
    return path if path.startswith("zoo:") else str(Path(path).expanduser().resolve())


def run(args) -> int:
    if args.k < 1:
        raise SpecirError("--k must be at least 1", hint="e.g. --k 4")
    for flag, value, example in (("--budget", args.budget, 32), ("--topk", args.topk, 4)):
        if value < 1:
            raise SpecirError(f"{flag} must be at least 1, got {value}", hint=f"e.g. {flag} {example}")
    target = _source(args.target_model) if args.target_model else "zoo:code-target"
    drafter = args.drafter or ("zoo:code-drafter" if target == "zoo:code-target" else "ngram")
    if drafter != "ngram":
        if (not drafter.startswith("zoo:") and not Path(drafter).expanduser().exists()
                and difflib.get_close_matches(drafter.lower(), ["ngram"], cutoff=0.6)):
            raise SpecirError(f"--drafter {drafter!r} is neither 'ngram' nor an existing folder",
                              hint="did you mean --drafter ngram?")
        drafter = _source(drafter)
    if drafter == "ngram" and args.draft == "tree":
        raise SpecirError("an n-gram drafter proposes a chain, not a tree",
                          hint="use --draft chain with --drafter ngram, or give a draft model for trees")
    name = args.name or re.sub(r"[^A-Za-z0-9_]", "_", Path(target.removeprefix("zoo:")).name) or "pipeline"
    if not re.match(r"[A-Za-z_]", name):
        name = "p_" + name
    if drafter != "ngram":
        check_same_tokenizer(resolve_source(target), resolve_source(drafter))
    pipeline = load_pipeline("<init>", text=pipeline_text(name, target, drafter, args.k))
    if args.draft == "tree":
        passes = build_passes(f"tree-verify{{budget={args.budget},topk={args.topk}}}")
        pipeline = PassManager(passes).run(pipeline)
    sys.stdout.write(print_pipeline(pipeline))
    return 0
