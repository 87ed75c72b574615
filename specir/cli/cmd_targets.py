"""specir targets: list the deployment targets (data from specir/targets.json)."""
from __future__ import annotations

import json

from ..targets import all_targets, host_target


def register(sub) -> None:
    p = sub.add_parser("targets", help="list deployment targets", description="List the targets the cost model "
                                                                               "and compile know.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    targets = all_targets()
    if args.json:
        print(json.dumps({n: vars(t) for n, t in targets.items()}, indent=2))
        return 0
    host = host_target()
    print(f"{'target':8} {'backend':8} {'HBM/DRAM':>10} {'copy BW':>10} {'bf16 FLOP/s':>12} {'SMs':>5} "
          f"{'smem/SM':>8} {'L2':>8}")
    for t in targets.values():
        mark = "  (this machine)" if t.name == host else ""
        print(f"{t.name:8} {t.backend:8} {t.memory_bandwidth / 1e12:8.2f}TB/s {t.copy_bandwidth / 1e12:8.2f}TB/s "
              f"{t.device_flops / 1e12:10.0f}T {t.sm_count:5d} {t.shared_memory_per_sm // 1024:6d}KB "
              f"{t.l2_bytes // 2**20:6d}MB{mark}")
    return 0
