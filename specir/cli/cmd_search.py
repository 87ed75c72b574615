"""specir search: cost-model-guided search of pass pipelines for one deployment."""
from __future__ import annotations

import json
import sys

from ..errors import SpecirError
from ..targets import all_targets
from .common import add_plugin_option


def register(sub) -> None:
    p = sub.add_parser("search", help="search pass pipelines for a deployment (writes best.spec and a report)",
                       description="Evaluate pass pipelines of SPEC (compile, the guard against the declared target, "
                                   "timing against AR decoding) guided by the cost model; agents may write new passes. "
                                   "Writes best.spec, report.json, report.md and progress.png to --out; validated "
                                   "mechanisms go to the memory.")
    p.add_argument("spec", metavar="SPEC", help="the input pipeline (.spec, e.g. from specir init)")
    p.add_argument("--target", required=True, help="deployment target: " + ", ".join(all_targets()))
    p.add_argument("--workload", help="a shipped workload (default: all of them)")
    p.add_argument("--prompts", metavar="FILE.jsonl", help="prompts to guard and time on instead of a workload")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--budget", type=int, default=20, help="candidates to evaluate (default 20)")
    p.add_argument("--workers", type=int, default=2, help="candidates evaluated at once (default 2)")
    p.add_argument("--ray", metavar="ADDRESS|local", help="evaluate on a Ray cluster (local: start one on this machine)")
    p.add_argument("--agent", metavar="MODEL", help="a litellm model name that writes passes")
    p.add_argument("--agent-base-url", metavar="URL", help="an OpenAI-compatible server for --agent")
    p.add_argument("--agent-calls", type=int, default=4, help="agent replies to try (default 4)")
    p.add_argument("--memory", metavar="FILE", help="the memory's SQLite file (default: under the user cache)")
    p.add_argument("--resume", action="store_true", help="continue the search already in --out")
    p.add_argument("--max-new-tokens", type=int, default=24, help="tokens per prompt when guarding and timing")
    p.add_argument("--rounds", type=int, default=3, help="timing rounds per candidate (median taken)")
    p.add_argument("--candidate-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="wall-time limit of each sandboxed stage and of generation (default 600)")
    p.add_argument("--candidate-memory", type=float, default=8.0, metavar="GB",
                   help="memory limit of sandboxed candidates (default 8)")
    p.add_argument("--space", metavar="FILE", help="the proposer's candidates are only the pass pipelines listed in FILE "
                   "(one per line, (input) for none), all ranked by the cost model; --plugin passes and agent replies "
                   "are still tried")
    p.add_argument("--seed", type=int, default=0, help="the proposer's and the prompt split's seed")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--json", action="store_true", help="print report.json's best and baseline")
    add_plugin_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..search.run import Settings, search
    for flag, value in (("--budget", args.budget), ("--workers", args.workers), ("--batch-size", args.batch_size),
                        ("--max-new-tokens", args.max_new_tokens), ("--rounds", args.rounds)):
        if value < 1:
            raise SpecirError(f"{flag} must be at least 1, got {value}", hint=f"e.g. {flag} 2")
    if args.agent_calls < 0:
        raise SpecirError("--agent-calls must be 0 or more", hint="e.g. --agent-calls 4")
    if not args.candidate_timeout > 0 or not args.candidate_memory > 0:
        raise SpecirError("--candidate-timeout and --candidate-memory must be positive", hint="e.g. 600 and 8")
    if args.agent_base_url and not args.agent:
        raise SpecirError("--agent-base-url needs --agent MODEL", hint="e.g. --agent openai/my-model")
    space = None
    if args.space is not None:
        from ..search.space_file import read_space_file
        space = read_space_file(args.space, plugins=bool(args.plugin))
    settings = Settings(spec=args.spec, target=args.target, out=args.out, workload=args.workload, prompts=args.prompts,
                        batch_size=args.batch_size, budget=args.budget, workers=args.workers, ray=args.ray,
                        agent=args.agent, agent_base_url=args.agent_base_url, agent_calls=args.agent_calls,
                        memory=args.memory, plugins=list(args.plugin or []), resume=args.resume,
                        max_new_tokens=args.max_new_tokens, rounds=args.rounds, timeout=args.candidate_timeout,
                        memory_limit_gb=args.candidate_memory, seed=args.seed, space=space)
    try:
        report = search(settings)
    except KeyboardInterrupt:
        print(f"specir: interrupted; the report of what finished is in {args.out}", file=sys.stderr)
        return 130
    best = report["best"]
    if args.json:
        print(json.dumps({"baseline": report["baseline"], "best": best, "evaluations": report["evaluations"],
                          "rank_correlation": report["rank_correlation"]}))
    elif best:
        rho = report["rank_correlation"]
        print(f"best of {report['evaluations']} evaluations: {best['pipeline'] or '(input pipeline)'}: "
              f"{best['speedup']:.3f}x over AR, tau {best['tau']:.2f}, {best['tokens_per_s']:.1f} tok/s; cost model "
              f"rank correlation {'n/a' if rho is None else f'{rho:.2f}'}; wrote {args.out}/best.spec, report.json, "
              f"report.md, progress.png")
    else:
        print(f"no candidate was validated in {report['evaluations']} evaluations; see {args.out}/report.md")
        return 1
    return 0
