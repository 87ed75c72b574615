"""specir opt: run passes and print the canonical IR."""
from __future__ import annotations

import sys

from ..compiler import optimise
from ..ir.printer import print_pipeline
from .common import add_pipeline_option, load_plugins


def register(sub) -> None:
    p = sub.add_parser("opt", help="run passes, print canonical IR",
                       description="Parse a .spec, expand imports, run passes (verifying after each), "
                                   "print the canonical IR to stdout.")
    p.add_argument("spec", help="pipeline file (.spec)")
    add_pipeline_option(p)
    p.add_argument("-o", "--output", help="write the IR to this file instead of stdout")
    p.add_argument("--target", help="run the passes as `specir compile --target T` would (a pass that prices "
                                    "for the compile target, e.g. batch-fusion's shrink table, prices for T; "
                                    "default: h200)")
    p.set_defaults(func=run)


def run(args) -> int:
    load_plugins(args)
    if args.target:
        from ..targets import get_target
        get_target(args.target)  # an unknown target: one clear error before any pass runs
    pipeline, _ = optimise(args.spec, args.passes, print_after_all=args.print_after_all, debug=args.debug,
                           target=args.target)
    text = print_pipeline(pipeline)
    if args.output:
        from ..build_folder import atomic_write_text
        atomic_write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0
