"""Options shared by several commands."""
from __future__ import annotations

import argparse
import math

from .. import pass_registry
from ..errors import SpecirError
from ..time_limit import PASS_TIMEOUT_S, set_pass_timeout


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
    seconds = getattr(args, "pass_timeout", PASS_TIMEOUT_S)
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise SpecirError(f"--pass-timeout must be a number of seconds >= 0, got {seconds}",
                          hint=f"e.g. --pass-timeout {PASS_TIMEOUT_S:g} (0 = no limit)")
    set_pass_timeout(seconds)
    for path in getattr(args, "plugin", []) or []:
        pass_registry.load_plugin(path)
