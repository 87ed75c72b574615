"""Options and prompt handling shared by run, check and bench."""
from __future__ import annotations

from ..errors import SpecirError
from ..runtime.prompts import read_prompts_file, to_ids, workload_records
from ..runtime.session import Session, open_session
from ..targets import all_targets
from .common import add_plugin_option, load_plugins


def add_source_options(parser, *, optional: bool = True) -> None:
    parser.add_argument("source", nargs="?" if optional else None, metavar="SPEC|BUILD",
                        help="a .spec file or a build folder (default: the shipped zoo pair)")
    parser.add_argument("--target", help="target for a .spec compiled on the fly: " + ", ".join(all_targets())
                        + " (default: this machine's GPU, else cpu)")
    parser.add_argument("-p", "--passes", default="", metavar="PIPELINE", help="passes for a .spec compiled on the fly")
    add_plugin_option(parser)


def session_from(args) -> Session:
    load_plugins(args)
    return open_session(args.source, args.target, args.passes)


def prompts_from(args, session: Session, *, limit: int | None) -> tuple[list[dict], list[list[int]]]:
    """Prompts from --prompts FILE, else from --workload (all shipped workloads by default)."""
    if getattr(args, "prompts", None):
        records = read_prompts_file(args.prompts)
        records = records[:limit] if limit else records
    else:
        records = workload_records(getattr(args, "workload", None), limit)
    target = session.pipeline.model(_target(session))
    ids = to_ids(records, str(session.target_folder()), target.graph.result_type.width)
    return records, ids


def _target(session) -> str:
    from ..runtime.baseline import target_name
    return target_name(session.pipeline)


def positive(name: str, value: int) -> int:
    if value < 1:
        raise SpecirError(f"{name} must be at least 1, got {value}")
    return value
