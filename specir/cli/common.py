"""Options shared by several commands."""
from __future__ import annotations

import argparse

from .. import plugins
from ..time_limit import PASS_TIMEOUT_S


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                        help="load Pass subclasses from a Python file (repeatable)")
    parser.add_argument("--pass-timeout", type=float, default=PASS_TIMEOUT_S, metavar="SECONDS",
                        help=f"stop a plugin import or a pass that runs longer than this (default {PASS_TIMEOUT_S:g}; "
                             f"0 = no limit)")


def add_pipeline_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-p", "--passes", dest="passes", default="", metavar="PIPELINE",
                        help='passes to run, e.g. "canonicalize,tree-verify{budget=32}"')
    parser.add_argument("--print-after-all", action="store_true", help="print the IR after every pass (stderr)")
    add_plugin_option(parser)


def load_plugins(args) -> None:
    """Set the pass time limit (--pass-timeout), then import every --plugin file."""
    plugins.load_plugins(getattr(args, "plugin", []), getattr(args, "pass_timeout", PASS_TIMEOUT_S))
