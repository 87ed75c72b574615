"""specir zoo: build the corpus, train the shipped pair, cut workloads, inflate and check models.

Sub-commands (each `specir zoo NAME --help`):
  corpus     tokenized stdlib corpus for training (built where the stdlib is, carried elsewhere)
  train      train the target and/or the drafter from a corpus (CPU or CUDA, resumable)
  workloads  cut the shipped workload prompts from a corpus's held-out documents
  install    copy trained model folders (or their .tar files) into the package as the default pair
  card       write the model card from the shipped models' train logs
  shapes     list the production shapes that `inflate` knows
  inflate    embed a small model function-preservingly into a production shape
  agree      token-forcing greedy agreement of a small model and its inflated copy
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specir.errors import SpecirError


def register(subparsers) -> None:
    p = subparsers.add_parser("zoo", help="the model zoo: corpus, training, workloads, inflation",
                              description=__doc__.split("\n", 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="zoo_command", metavar="ZOO_COMMAND")

    c = sub.add_parser("corpus", help="build the tokenized stdlib corpus")
    c.add_argument("--out", required=True, type=Path, help="corpus folder to write")
    c.add_argument("--vocab-size", type=int, default=4096, help="BPE vocabulary size (default 4096)")
    c.add_argument("--file-list", type=Path, help="document list (default: the shipped fixed list)")
    c.add_argument("--rescan", action="store_true",
                   help="use every document this machine's stdlib has instead of the fixed list")
    c.set_defaults(func=run, zoo_func=_corpus)

    t = sub.add_parser("train", help="train the target and/or drafter from a corpus")
    t.add_argument("--corpus", required=True, type=Path, help="folder from `specir zoo corpus`")
    t.add_argument("--out", required=True, type=Path, help="output folder (models, checkpoints, tars)")
    t.add_argument("--model", choices=("target", "drafter", "both", "tiny", "mid", "hybrid"), default="both",
                   help="what to train (default both: the target, then the drafter)")
    t.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    length = t.add_mutually_exclusive_group(required=True)
    length.add_argument("--minutes", type=float, help="wall-time budget per model")
    length.add_argument("--steps", type=int, help="optimizer steps per model")
    t.add_argument("--drafter-minutes", type=float, help="drafter's budget (default: --minutes)")
    t.add_argument("--drafter-steps", type=int, help="drafter's steps (default: --steps)")
    t.add_argument("--resume", action="store_true", help="continue from the checkpoints in --out")
    t.add_argument("--fresh", action="store_true", help="start over even if checkpoints exist")
    t.add_argument("--batch-size", type=int, default=64, help="windows per step (default 64)")
    t.add_argument("--seq-len", type=int, default=512, help="tokens per window (default 512)")
    t.add_argument("--lr", type=float, default=None,
                   help="peak learning rate (default 2e-3 for the target, 3e-3 otherwise)")
    t.add_argument("--max-epochs", type=float, default=16.0,
                   help="cap on passes over the train split (default 16)")
    t.add_argument("--no-distill", action="store_true",
                   help="train the drafter, the mid model and the hybrid on tokens only (default: distil from the Llama target)")
    t.add_argument("--eval-windows", type=int, default=64,
                   help="held-out windows per evaluation (default 64)")
    t.add_argument("--seed", type=int, default=0)
    t.set_defaults(func=run, zoo_func=_train)

    w = sub.add_parser("workloads", help="cut the workload prompts from a corpus's held-out files")
    w.add_argument("--corpus", required=True, type=Path, help="folder from `specir zoo corpus`")
    w.add_argument("--out", type=Path, help="folder for <name>.jsonl (default: the package's)")
    w.add_argument("--per-workload", type=int, default=48, help="prompts per workload (default 48)")
    w.set_defaults(func=run, zoo_func=_workloads)

    i = sub.add_parser("install", help="install trained models as the shipped default pair")
    i.add_argument("sources", nargs="+", type=Path,
                   help="code-target / code-drafter folders or their .tar files")
    i.set_defaults(func=run, zoo_func=_install)

    k = sub.add_parser("card", help="write the model card from the shipped train logs")
    k.add_argument("--out", type=Path, help="file to write (default: the package's MODEL_CARD.md)")
    k.set_defaults(func=run, zoo_func=_card)

    s = sub.add_parser("shapes", help="list the production shapes known to `inflate`")
    s.set_defaults(func=run, zoo_func=_shapes)

    f = sub.add_parser("inflate", help="embed a small model into a production shape")
    f.add_argument("small", type=Path, help="small model folder (e.g. the shipped code-target)")
    f.add_argument("--shape", required=True, help="shape name (see `specir zoo shapes`)")
    f.add_argument("--out", required=True, type=Path, help="folder to write (HF format, sharded)")
    f.add_argument("--device", default="auto", help="where to generate the random values")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--report", type=Path,
                   help="also write the weight-statistics report (JSON) here")
    f.set_defaults(func=run, zoo_func=_inflate)

    a = sub.add_parser("agree", help="greedy agreement of a small model and its inflated copy")
    a.add_argument("small", type=Path)
    a.add_argument("big", type=Path)
    a.add_argument("--workload", action="append", default=None,
                   help="workload name or prompts JSONL (repeatable; default: all shipped)")
    a.add_argument("--limit", type=int, default=None, help="prompts per workload (default: all)")
    a.add_argument("--max-new-tokens", type=int, default=None,
                   help="continuation length (default: each prompt's max_new_tokens)")
    a.add_argument("--device", default="auto")
    a.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="compute dtype of both models (default float32)")
    a.add_argument("--min-agreement", type=float, default=0.99,
                   help="fail (exit 1) below this fraction (default 0.99)")
    a.add_argument("--json", action="store_true", help="print the full report as JSON")
    a.set_defaults(func=run, zoo_func=_agree)

    p.set_defaults(func=run, zoo_func=None, zoo_parser=p)


def run(args) -> int:
    if args.zoo_func is None:
        args.zoo_parser.print_help()
        return 2
    return int(args.zoo_func(args) or 0)


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SpecirError(f"--device {name} was asked for but this machine has no CUDA GPU",
                          hint="use --device cpu (or auto)")
    if not (name == "cpu" or name.startswith("cuda")):
        raise SpecirError(f"unknown device '{name}'", hint="use cpu, cuda, cuda:N or auto")
    return name


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _corpus(args) -> int:
    from specir.zoo.corpus import build_corpus

    meta = build_corpus(args.out, vocab_size=args.vocab_size, file_list=args.file_list,
                        rescan=args.rescan, log=_log)
    print(json.dumps(meta["splits"]))
    return 0


def _teacher(role: str, out: Path) -> str | None:
    """The distillation teacher of a role: the Llama target trained in `out` (the drafter), or that
    target else the shipped one (the mid model and the hybrid target, which join the shipped
    pair); None for the target."""
    if role not in ("drafter", "mid", "hybrid"):
        return None
    from specir.zoo.paths import MODELS

    candidates = [out / "code-target"] + ([MODELS / "code-target"] if role in ("mid", "hybrid") else [])
    for teacher in candidates:
        if (teacher / "config.json").exists():
            return str(teacher)
    raise SpecirError(f"the {role} is distilled from the target, which is not trained yet",
                      path=str(candidates[0]), hint="train the target first, or pass --no-distill")


def _train(args) -> int:
    from specir.zoo.train import TrainSettings, command_line, train

    device = resolve_device(args.device)
    roles = ["target", "drafter"] if args.model == "both" else [args.model]
    from specir.zoo.train import DEFAULT_LR

    common = dict(seq_len=args.seq_len, batch_size=args.batch_size,
                  max_epochs=args.max_epochs, seed=args.seed, eval_windows=args.eval_windows)
    for role in roles:
        minutes, steps = args.minutes, args.steps
        if role == "drafter" and minutes is not None:
            minutes = args.drafter_minutes or minutes
        if role == "drafter" and steps is not None:
            steps = args.drafter_steps or steps
        teacher = None if args.no_distill else _teacher(role, args.out)
        lr = args.lr or DEFAULT_LR.get(role, 3e-3)
        settings = TrainSettings(role=role, minutes=minutes, steps=steps, teacher=teacher, lr=lr,
                                 **common)
        train(args.corpus, args.out, settings, device=device, resume=args.resume, fresh=args.fresh,
              command=command_line(), log=_log)
    return 0


def _workloads(args) -> int:
    from specir.zoo.workload_builder import build_workloads

    counts = build_workloads(args.corpus, args.out, per_workload=args.per_workload, log=_log)
    print(json.dumps(counts))
    return 0


def _install(args) -> int:
    from specir.zoo.install import install_models

    for folder in install_models(args.sources, log=_log):
        print(folder)
    return 0


def _card(args) -> int:
    from specir.zoo.model_card import write_model_card

    print(write_model_card(args.out))
    return 0


def _shapes(args) -> int:
    from specir.zoo.shapes import SHAPES

    for name, shape in SHAPES.items():
        print(f"{name:16s} {shape.describe()}")
    return 0


def _inflate(args) -> int:
    from specir.zoo.inflate import inflate
    from specir.zoo.shapes import get_shape

    report = inflate(args.small, get_shape(args.shape), args.out, device=resolve_device(args.device),
                     seed=args.seed, log=_log)
    from specir.zoo.weight_stats import format_stats

    if args.report:
        args.report.write_text(json.dumps(report, indent=1))
    _log("inflate: per-tensor statistics, big vs trained (exponents: distinct bf16 exponent "
         "values; 14-window: share in the best 14 consecutive exponents)\n" + format_stats(report["tensors"]))
    print(args.out)
    return 0


def _agree(args) -> int:
    from specir.zoo.agreement import format_report, measure_agreement

    report = measure_agreement(args.small, args.big, workloads=args.workload, limit=args.limit,
                               max_new_tokens=args.max_new_tokens,
                               device=resolve_device(args.device), dtype=args.dtype, log=_log)
    if args.json:  # the JSON on stdout, the readable summary on stderr
        print(json.dumps(report, indent=1))
        _log(format_report(report))
    else:
        print(format_report(report))
    if report["agreement"] < args.min_agreement:
        _log(f"zoo agree: agreement {report['agreement']:.4%} is below {args.min_agreement:.2%}")
        return 1
    return 0


def main(argv=None) -> int:
    """Run `specir zoo ...` without the top-level CLI (used before main.py lists zoo)."""
    parser = argparse.ArgumentParser(prog="specir")
    register(parser.add_subparsers())
    args = parser.parse_args(["zoo", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run(args)
    except SpecirError as exc:
        print(exc.format(), file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
