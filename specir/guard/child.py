"""The generating side of the guard: `python -m specir.guard.child JOB.json OUT.json`.

This process is the only one that imports plugins (`--plugin` files, the `specir.passes` entry
points, agent code). It opens what is being checked (a build, or a .spec compiled on the fly with
the job's passes), generates for the job's prompts and writes
`{"outputs": [[token, ...], ...], "backend": ..., "target": ..., "seconds": ...}` to OUT.json, or
`{"error": "<the one formatted message>"}`. What it writes is judged, never trusted.
"""
from __future__ import annotations

import json
import sys
import time


def generate(job: dict) -> dict:
    from ..plugins import load_plugins
    from ..runtime.session import open_session

    load_plugins(job.get("plugins") or [])
    session = open_session(job.get("source"), job.get("target"), job.get("passes") or "")
    engine = session.engine()
    prompts, size, outputs = job["prompts"], int(job.get("batch_size") or 1), []
    start = time.perf_counter()
    for i in range(0, len(prompts), size):
        results = engine.generate(prompts[i:i + size], int(job["max_new_tokens"]),
                                  temperature=float(job.get("temperature") or 0.0), seed=int(job.get("seed") or 0))
        outputs += [list(map(int, r.tokens)) for r in results]
        print(f"guard: generated {len(outputs)}/{len(prompts)} prompts", file=sys.stderr, flush=True)
    return {"outputs": outputs, "backend": session.backend, "target": session.target.name,
            "seconds": time.perf_counter() - start}


if __name__ == "__main__":
    from .process import stage_main
    sys.exit(stage_main(generate, sys.argv[1:]))
