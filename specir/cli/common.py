"""Options shared by several commands."""
from __future__ import annotations

import argparse

from .. import pass_registry


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                        help="load Pass subclasses from a Python file (repeatable)")


def add_pipeline_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-p", "--passes", dest="passes", default="", metavar="PIPELINE",
                        help='passes to run, e.g. "canonicalize,tree-verify{budget=32}"')
    parser.add_argument("--print-after-all", action="store_true", help="print the IR after every pass (stderr)")
    add_plugin_option(parser)


def load_plugins(args) -> None:
    for path in getattr(args, "plugin", []) or []:
        pass_registry.load_plugin(path)
