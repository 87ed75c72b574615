"""specir init: write a ready pipeline for given checkpoints (to stdout)."""
from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from ..errors import SourceLocation, SpecirError
from ..pipeline_template import pipeline_text
from ..importers import resolve_source
from ..importers.tokenizer_match import check_same_tokenizer
from ..ir.opdefs import MAX_DRAFT_TOKENS, MAX_TREE_BUDGET
from ..ir.printer import print_pipeline
from ..load import load_pipeline
from ..pass_infra import PassManager, build_passes


def register(sub) -> None:
    p = sub.add_parser("init", help="write a ready pipeline for the given checkpoints",
                       description="Write a pipeline (canonical IR, models expanded) to stdout. With no "
                                   "--target-model, the shipped zoo pair.")
    p.add_argument("--target-model", metavar="DIR", help="target checkpoint folder (default: the zoo target)")
    p.add_argument("--drafter", metavar="DIR|ngram|none",
                   help="draft checkpoint folder, 'ngram' for prompt lookup, or 'none' for autoregressive decoding "
                        "(no drafting: a pass such as pack-weights measured alone) (default: the zoo drafter with "
                        "the zoo target, else ngram)")
    p.add_argument("--mid", metavar="DIR",
                   help="also import a mid-size model as @mid (e.g. zoo:code-mid), the verifier that "
                        'two-level-verify{kind=model,model=mid} puts between the drafter and the target')
    p.add_argument("--draft", choices=("chain", "tree"), default="chain", help="draft shape (default chain)")
    p.add_argument("--k", type=int, help="drafted tokens per step for chains, depth for trees (default 4)")
    p.add_argument("--budget", type=int, default=32, help="tree: drafted nodes per step")
    p.add_argument("--topk", type=int, default=4, help="tree: children per node")
    p.add_argument("--name", help="pipeline name (default: from the target folder)")
    p.set_defaults(func=run)


def _flag_location(flag: str, value: str) -> SourceLocation:
    """The flag's value on a reconstructed command line, for the caret."""
    line = f"specir init ... {flag} {value}"
    return SourceLocation("command line", 1, len(line) - len(value) + 1, line)


def _source(path: str) -> str:
    return path if path.startswith("zoo:") else str(Path(path).expanduser().resolve())


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def run(args) -> int:
    k_given, args.k = args.k is not None, 4 if args.k is None else args.k
    if args.k < 1:
        raise SpecirError("--k must be at least 1", hint="e.g. --k 4")
    for flag, value, example, most in (("--k", args.k, 4, MAX_DRAFT_TOKENS), ("--budget", args.budget, 32, MAX_TREE_BUDGET),
                                       ("--topk", args.topk, 4, MAX_DRAFT_TOKENS)):
        if value < 1:
            raise SpecirError(f"{flag} must be at least 1, got {value}", hint=f"e.g. {flag} {example}")
        if value > most:
            shown = value if value < 10**24 else f"{str(value)[:12]}... ({len(str(value))} digits)"
            raise SpecirError(f"{flag} must be at most {most}, got {shown}", hint=f"e.g. {flag} {example}")
    for flag, value in (("--target-model", args.target_model), ("--drafter", args.drafter), ("--mid", args.mid)):
        if value is not None and not value.strip():
            raise SpecirError(f"{flag} is empty", hint=f"give {flag} a checkpoint folder"
                              + (", 'ngram' or 'none'" if flag == "--drafter" else "")
                              + (" (leave the flag out for no mid model)" if flag == "--mid" else
                                 " (leave the flag out for the zoo pair)"))
    if args.name is not None and not _NAME.fullmatch(args.name):
        raise SpecirError(f"--name {args.name!r} is not a pipeline name", location=_flag_location("--name", args.name),
                          hint="a name starts with a letter or _ and holds only A-Z, a-z, 0-9 and _ (ASCII)")
    target = _source(args.target_model) if args.target_model else "zoo:code-target"
    drafter = args.drafter or ("zoo:code-drafter" if target == "zoo:code-target" else "ngram")
    if drafter not in ("ngram", "none"):
        close = ([] if drafter.startswith("zoo:") or Path(drafter).expanduser().exists()
                 else difflib.get_close_matches(drafter.lower(), ["ngram", "none"], n=1, cutoff=0.6))
        if close:
            raise SpecirError(f"--drafter {drafter!r} is neither 'ngram', 'none' nor an existing folder",
                              hint=f"did you mean --drafter {close[0]}?")
        drafter = _source(drafter)
    if drafter == "ngram" and args.draft == "tree":
        raise SpecirError("an n-gram drafter proposes a chain, not a tree",
                          hint="use --draft chain with --drafter ngram, or give a draft model for trees")
    if drafter == "none":
        for given, flag, what in ((args.draft == "tree", "--draft tree", "there is no tree to draft"),
                                  (k_given, "--k", "it drafts no tokens"),
                                  (args.mid is not None, "--mid", "there is no draft for @mid to verify")):
            if given:
                raise SpecirError(f"--drafter none decodes autoregressively: {what} ({flag})",
                                  hint=f"leave {flag} out, or give a draft model (--drafter DIR or ngram)")
    name = args.name or re.sub(r"[^A-Za-z0-9_]", "_", Path(target.removeprefix("zoo:")).name) or "pipeline"
    if not re.match(r"[A-Za-z_]", name):
        name = "p_" + name
    if drafter not in ("ngram", "none"):
        check_same_tokenizer(resolve_source(target), resolve_source(drafter))
    mid = _source(args.mid) if args.mid is not None else None
    if mid is not None:
        check_same_tokenizer(resolve_source(target), resolve_source(mid))
    pipeline = load_pipeline("<init>", text=pipeline_text(name, target, drafter, args.k, mid))
    if args.draft == "tree":
        passes = build_passes(f"tree-verify{{budget={args.budget},topk={args.topk}}}")
        pipeline = PassManager(passes).run(pipeline)
    sys.stdout.write(print_pipeline(pipeline))
    return 0
