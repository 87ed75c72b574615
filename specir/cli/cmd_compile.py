"""specir compile: passes + lowering into a build folder."""
from __future__ import annotations

import sys

from ..compiler import compile_pipeline
from ..targets import all_targets
from .common import add_pipeline_option, load_plugins


def register(sub) -> None:
    p = sub.add_parser("compile", help="run passes and lower for a target into build/",
                       description="Run passes and lower for a target. Writes OUT/pipeline.spec (final IR), "
                                   "OUT/manifest.json and the generated kernels, atomically.")
    p.add_argument("spec", help="pipeline file (.spec)")
    p.add_argument("--target", required=True, help="one of: " + ", ".join(all_targets()))
    p.add_argument("-o", "--output", default="build", help="build folder (default: build)")
    p.add_argument("--emit-ptx", action="store_true",
                   help="GPU targets: also compile every launched Triton kernel to PTX for the target's architecture "
                        "(build/ptx/; about a second per kernel)")
    add_pipeline_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    load_plugins(args)
    manifest = compile_pipeline(args.spec, args.target, args.output, args.passes,
                                print_after_all=args.print_after_all, debug=args.debug, plugins=args.plugin,
                                emit_ptx=args.emit_ptx)
    est = manifest["cost_model"]["step_seconds"]
    step = f"{est * 1e3:.3f} ms" if est >= 1e-4 else f"{est * 1e6:.2f} us"
    if manifest["cost_model"].get("drafting_off"):
        step += " (AR's: drafting is off, see the note)"
    print(f"compiled {args.spec} for {manifest['target']} ({manifest['backend']} backend) -> "
          f"{str(args.output).rstrip('/')}/ [{kernel_count(manifest['kernels'])}, passes: "
          f"{manifest['pass_pipeline'] or 'none'}, modelled step {step}]", file=sys.stderr)
    for note in manifest["notes"]:
        print(f"note: {note}", file=sys.stderr)
    return 0


def kernel_count(kernels: list[dict]) -> str:
    """'41 kernels: 38 tvm, 3 torch' (by backend, most first; one backend: '12 kernels')."""
    by: dict[str, int] = {}
    for k in kernels:
        by[k.get("backend", "?")] = by.get(k.get("backend", "?"), 0) + 1
    total = f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''}"
    if len(by) < 2:
        return total
    return total + ": " + ", ".join(f"{n} {b}" for b, n in sorted(by.items(), key=lambda kv: -kv[1]))
