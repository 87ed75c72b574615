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
    target = session.pipeline.model(_target(session))
    return read_prompts(args, str(session.target_folder()), target.graph.result_type.width,
                        target.attrs.get("max_position"), limit=limit)


def read_prompts(args, tokenizer_folder: str, vocab: int, context: int | None, *,
                 limit: int | None) -> tuple[list[dict], list[list[int]]]:
    """Prompt records and their ids (tokenized with the target's tokenizer), each checked against the
    vocabulary and the context (`context` tokens with max-new-tokens)."""
    if getattr(args, "limit", None) is not None and args.limit < 0:
        raise SpecirError(f"--limit must be 0 (all prompts) or more, got {args.limit}", hint="e.g. --limit 5")
    if getattr(args, "prompts", None):
        records = read_prompts_file(args.prompts)
        records = records[:limit] if limit else records
    else:
        records = workload_records(getattr(args, "workload", None), limit)
    ids = to_ids(records, tokenizer_folder, vocab)
    _check_context(records, ids, context, getattr(args, "max_new_tokens", None), getattr(args, "prompts", None))
    return records, ids


def _check_context(records, ids, context, max_new, prompts_file) -> None:
    """Every prompt must fit the target's context with max-new-tokens; checked up front so the error names
    the prompt's line or workload id (not its place in a batch) and comes before any decoding."""
    if context is None:
        return
    context = int(context)
    for n, (rec, p) in enumerate(zip(records, ids)):
        path = f"{prompts_file}:{rec['_line']}" if "_line" in rec else None
        what = "the prompt" if path else f"workload prompt {rec.get('id', n)}"
        if not p:
            raise SpecirError(f"{what} is empty", path=path, hint="give at least one token")
        if len(p) >= context or (max_new and len(p) + max_new > context):
            fix = (f"use --max-new-tokens {context - len(p)} or less" if len(p) < context else
                   "shorten the prompt" if "_line" in rec else
                   "use --prompts FILE.jsonl with prompts that fit this target's context")
            raise SpecirError(f"{what} has {len(p)} tokens; with max-new-tokens {max_new} it does not "
                              f"fit the target's context of {context}", path=path, hint=fix)


def _target(session) -> str:
    from ..runtime.baseline import target_name
    return target_name(session.pipeline)


def positive(name: str, value: int) -> int:
    if value < 1:
        raise SpecirError(f"{name} must be at least 1, got {value}", hint=f"e.g. {name} 4")
    return value
