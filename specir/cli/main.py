"""The `specir` command. Each sub-command lives in specir/cli/cmd_<name>.py."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import SpecirError
from ..time_limit import PASS_TIMEOUT_S, set_pass_timeout

COMMANDS = ["init", "opt", "compile", "run", "check", "bench", "serve", "search", "memory", "calibrate", "targets", "zoo"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specir", description="A compiler for speculative-decoding pipelines.",
        epilog="Run `specir COMMAND --help` for a command's options.")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"specir.cli.cmd_{name}").register(sub)
    for command in sub.choices.values():  # --debug is accepted after the command too
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show Python tracebacks on errors")
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    set_pass_timeout(PASS_TIMEOUT_S)  # per invocation (main may run many times in one process)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except SpecirError as exc:
        if debug:
            raise
        print(exc.format(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("specir: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: one line, and the way to see more
        if debug:
            raise
        if _out_of_device_memory(exc):  # not a bug: the device is too small for what was asked
            print(f"specir: error: the device ran out of memory: {str(exc).splitlines()[0][:300]}\n  hint: ask for "
                  f"less at once (fewer requests in a batch, fewer new tokens) or use a device with more memory; "
                  f"`bench --check` also holds the judge's copy of the target", file=sys.stderr)
            return 1
        print(f"specir: internal error: {type(exc).__name__}: {exc}\n  hint: rerun with --debug for the "
              f"traceback, and please report it", file=sys.stderr)
        return 3


def _out_of_device_memory(exc: BaseException) -> bool:
    """torch's out-of-memory error (a subclass of RuntimeError), without importing torch for it."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(exc, getattr(torch, "OutOfMemoryError", ()))


if __name__ == "__main__":
    sys.exit(main())
