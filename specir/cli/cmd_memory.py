"""specir memory: the memory of validated mechanisms (list, show, export)."""
from __future__ import annotations

import json

from ..errors import SpecirError


def register(sub) -> None:
    p = sub.add_parser("memory", help="the memory of validated mechanisms",
                       description="Read the search's memory (SQLite): list its mechanisms, show one, export all.")
    p.add_argument("action", choices=("list", "show", "export"))
    p.add_argument("id", nargs="?", type=int, help="show: the mechanism's id")
    p.add_argument("--memory", metavar="FILE", help="the memory file (default: under the user cache)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..search.memory import Memory
    memory = Memory(args.memory, create=False)
    if args.action == "show":
        if args.id is None:
            raise SpecirError("specir memory show needs an id", hint="specir memory list shows them")
        m = memory.get(args.id)
        if args.json:
            print(json.dumps(m))
            return 0
        for key in ("id", "date", "target_identity", "drafter", "workload", "target", "batch_size", "pipeline",
                    "speedup", "tau", "tokens_per_s", "ir_digest", "pass_hash", "search"):
            print(f"{key}: {m[key]}")
        v = m["verdict"]
        print(f"verdict: ok={v.get('ok')} {v.get('tokens_checked')} tokens checked, {v.get('mismatches')} mismatches, "
              f"{v.get('near_ties')} near-ties")
        if m["pass_source"]:
            print("pass source:\n" + m["pass_source"])
        return 0
    rows = memory.list()
    if args.action == "export" or args.json:
        print(json.dumps(rows, indent=None if args.action == "list" else 1))
        return 0
    if not rows:
        print(f"{memory.path}: no mechanisms yet")
        return 0
    print("| id | target | drafter | workload | batch | pipeline | speedup | tau | tok/s | date |")
    print("|---:|---|---|---|---:|---|---:|---:|---:|---|")
    for m in rows:
        print(f"| {m['id']} | {m['target']} | {m['drafter']} | {m['workload']} | {m['batch_size']} | "
              f"`{m['pipeline'] or '(none)'}`{' +pass' if m['pass_source'] else ''} | {m['speedup']:.3f}x | "
              f"{m['tau']:.2f} | {m['tokens_per_s']:.1f} | {m['date']} |")
    return 0
