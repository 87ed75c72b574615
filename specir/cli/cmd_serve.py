"""specir serve: an OpenAI-compatible endpoint for a pipeline (continuous batching, streaming, metrics)."""
from __future__ import annotations

import sys

from ..errors import SpecirError
from ..runtime.baseline import target_name
from .common_run import add_source_options, session_from


def register(sub) -> None:
    p = sub.add_parser("serve", help="serve a pipeline over an OpenAI-compatible HTTP API",
                       description="Serve a pipeline (a build folder, or a .spec compiled on the fly; with no "
                                   "SPEC|BUILD: the shipped zoo pair) at /v1/completions, /v1/chat/completions, "
                                   "/v1/models, /health and /metrics, with continuous batching.")
    add_source_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--max-batch-size", type=int, default=8, metavar="B",
                   help="requests decoded together (default 8)")
    p.add_argument("--max-queue", type=int, default=64, metavar="Q",
                   help="requests allowed to wait for a slot; more are answered 429 (default 64)")
    p.add_argument("--max-model-len", type=int, default=None, metavar="N",
                   help="prompt + completion tokens per request (default: the target's context, at most 4096); "
                        "sizes each slot's cache")
    p.set_defaults(func=run)


def run(args) -> int:
    if not 0 <= args.port <= 65535:
        raise SpecirError(f"--port must be from 0 to 65535, got {args.port}", hint="e.g. --port 8000")
    if args.max_batch_size < 1:
        raise SpecirError(f"--max-batch-size must be at least 1, got {args.max_batch_size}", hint="e.g. --max-batch-size 8")
    if args.max_queue < 0:
        raise SpecirError(f"--max-queue must be 0 or more, got {args.max_queue}", hint="e.g. --max-queue 64")
    if args.max_model_len is not None and args.max_model_len < 2:
        raise SpecirError(f"--max-model-len must be at least 2, got {args.max_model_len}", hint="e.g. --max-model-len 4096")
    from ..serve.server import Server, Service
    session = session_from(args)
    context = int(session.pipeline.model(target_name(session.pipeline)).attrs.get("max_position", 1 << 30))
    if args.max_model_len is not None and args.max_model_len > context:
        raise SpecirError(f"--max-model-len must be from 2 to the target's context of {context}, got "
                          f"{args.max_model_len}", hint=f"e.g. --max-model-len {min(context, 4096)}")
    engine = session.engine()
    service = Service(session, engine, max_batch_size=args.max_batch_size, max_queue=args.max_queue,
                      max_model_len=args.max_model_len)
    server = Server(service, args.host, args.port)

    def ready(srv) -> None:
        chat = service.chat.source if service.chat else "none (no tokenizer)"
        print(f"specir serve: model {service.model!r} at {srv.url}/v1 ({session.backend} backend on "
              f"{session.target.name}; batch {args.max_batch_size}, queue {args.max_queue}, "
              f"{service.context} tokens a request; chat template: {chat}). Ctrl-C stops.",
              file=sys.stderr, flush=True)

    server.serve_forever(on_ready=ready)
    return 0
