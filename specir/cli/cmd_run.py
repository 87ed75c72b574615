"""specir run: generate with a pipeline."""
from __future__ import annotations

import json
import math
import sys

from ..errors import SpecirError
from ..runtime.baseline import target_name
from ..runtime.bench import WARM_UP_TOKENS, warm_up
from ..runtime.memory import check_batch_fits, weight_bytes
from ..runtime.tokenizer import decode, encode, parse_prompt_ids
from .common_run import add_source_options, positive, session_from


def register(sub) -> None:
    p = sub.add_parser("run", help="generate text with a pipeline",
                       description="Generate with a pipeline (a .spec compiled on the fly, or a build folder). "
                                   "With no SPEC|BUILD: the shipped zoo pair.")
    add_source_options(p)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--prompt", help="prompt text (tokenized with the target's tokenizer)")
    group.add_argument("--prompt-ids", help="prompt token ids, comma-separated")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true",
                   help="print {tokens, text, accept_lengths, tokens_per_s (decoding), prefill_s, setup_s (loading, "
                        f"compiling, capturing and a warm-up of {WARM_UP_TOKENS} tokens of the same prompt), ...}} as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    positive("--max-new-tokens", args.max_new_tokens)
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise SpecirError(f"--temperature must be a finite number >= 0, got {args.temperature}",
                          hint="0 = greedy; e.g. --temperature 0.8")
    if not 0 <= args.seed < 2**64:
        shown = args.seed if abs(args.seed) < 10**24 else f"{str(args.seed)[:12]}... ({len(str(args.seed))} digits)"
        raise SpecirError(f"--seed must be from 0 to 2**64 - 1, got {shown}", hint="e.g. --seed 0")
    session = session_from(args)
    folder = str(session.target_folder())
    prompt = parse_prompt_ids(args.prompt_ids) if args.prompt_ids is not None else encode(folder, args.prompt)
    vocab = session.pipeline.model(target_name(session.pipeline)).graph.result_type.width
    bad = [i for i in prompt if not 0 <= i < vocab]
    if bad:
        raise SpecirError(f"token id {bad[0]} is outside the target's vocabulary of {vocab}",
                          hint=f"--prompt-ids takes ids from 0 to {vocab - 1}; or give --prompt TEXT")
    check_batch_fits(session.pipeline, 1, len(prompt), args.max_new_tokens, session.device, "--max-new-tokens",
                     backend=session.backend, resident=weight_bytes(session.pipeline))
    engine = session.engine()
    # as bench warms each batch size: the timed call below reports decoding alone
    warm_s = warm_up(engine, [prompt], 1, args.max_new_tokens, temperature=args.temperature, seed=args.seed)
    result = engine.generate([prompt], args.max_new_tokens, temperature=args.temperature, seed=args.seed)[0]
    setup_s = engine.setup_s + warm_s
    text = decode(folder, result.tokens)
    t = engine.timings
    tps = len(result.tokens) / t["decode_s"] if t["decode_s"] > 0 else 0.0
    e2e = len(result.tokens) / (t["decode_s"] + t["prefill_s"]) if t["decode_s"] + t["prefill_s"] > 0 else 0.0
    if args.json:
        print(json.dumps({"tokens": result.tokens, "text": text, "accept_lengths": result.accept_lengths,
                          "tokens_per_s": round(tps, 3), "e2e_tokens_per_s": round(e2e, 3),
                          "prefill_s": round(t["prefill_s"], 6), "setup_s": round(setup_s, 3),
                          "tau": round(result.tau, 4), "finish_reason": result.finish_reason,
                          "target": session.target.name, "backend": session.backend}))
    else:
        sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))
        print(f"[{len(result.tokens)} tokens, {tps:.1f} tok/s decoding ({e2e:.1f} with the prefill), tau "
              f"{result.tau:.2f}, set-up {setup_s:.1f} s, {session.backend} backend on "
              f"{session.target.name}]", file=sys.stderr)
    return 0

