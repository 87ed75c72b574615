"""specir calibrate: microbenchmarks of this machine for the cost model (cached per machine)."""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="measure this machine for the cost model",
                       description="Run the cost model's microbenchmarks (copy bandwidth, matmul rate, the cost of "
                                   "one small op) for --target on this machine and cache them under the user cache.")
    p.add_argument("--target", default=None, help="the target to calibrate (default: this machine's GPU, else cpu)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..calibration import measure, save
    from ..targets import get_target, host_target, require_available
    target = get_target(args.target or host_target())
    require_available(target)
    cal = measure(target)
    path = save(cal)
    if args.json:
        print(json.dumps({**cal.as_dict(), "file": str(path)}))
    else:
        print(f"{target.name}: copy bandwidth {cal.bandwidth / 1e9:.1f} GB/s (datasheet {target.device_bandwidth / 1e9:.1f}), "
              f"matmul {cal.flops / 1e12:.3f} TFLOP/s (datasheet {target.device_flops / 1e12:.3f}), one small op "
              f"{cal.op_seconds * 1e6:.1f} us; cached in {path}")
    return 0
