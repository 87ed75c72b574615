"""Candidate work that loads plugin or agent code: `python -m specir.search.stage JOB.json OUT.json`.

Run inside the sandbox (search/sandbox.py) whenever a candidate names a plugin. Jobs:
- `describe`: import the plugins; their passes as data (name, options with their searched values,
  requires, provides), so the search process learns them without importing them;
- `compile`: the candidate's final IR (its printed text and digest) and its build folder
  (compiler.compile_pipeline);
- `guard`: guard.run_guard on the build (its judge and child inherit the sandbox).
The result is JSON in OUT.json, or {"error": the one formatted message}.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import sys


def ir_digest_of_text(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def describe(plugins: list[str]) -> dict:
    from specir.pass_infra import all_passes, load_plugin
    names = []
    for path in plugins:
        names += load_plugin(path)
    passes = {}
    for name, cls in all_passes().items():
        if name not in names:
            continue
        passes[name] = {"options": {k: {"type": o.type.__name__, "default": o.default, "choices": o.choices,
                                        "min": o.min, "max": getattr(o, "max", None),
                                        "search": list(o.search_values())} for k, o in cls.options.items()},
                        "requires": sorted(cls.requires), "provides": sorted(cls.provides)}
    return {"passes": passes}


def compile_candidate(job: dict) -> dict:
    """The candidate's optimised IR (text, digest) and, unless `digest_only`, its build."""
    from specir.compiler import compile_pipeline, optimise
    from specir.ir.printer import print_pipeline
    from specir.pass_infra import load_plugin
    for path in job.get("plugins") or []:
        load_plugin(path)
    with contextlib.redirect_stderr(io.StringIO()):
        pipeline, _ = optimise(job["spec"], job["passes"], target=job["target"])
        text = print_pipeline(pipeline)
        result = {"ir_digest": ir_digest_of_text(text), "ir": text}
        if job.get("digest_only") or job.get("known") and result["ir_digest"] in job["known"]:
            return result
        manifest = compile_pipeline(job["spec"], job["target"], job["out"], job["passes"], plugins=job.get("plugins") or [])
    return {**result, "build": job["out"], "kernels": len(manifest.get("kernels") or [])}


def guard(job: dict) -> dict:
    from specir.guard import GuardRequest, run_guard
    verdict = run_guard(GuardRequest(**job["request"]))
    return {"verdict": verdict.as_dict(), "ok": verdict.ok}


JOBS = {"describe": lambda job: describe(job["plugins"]), "compile": compile_candidate, "guard": guard}


if __name__ == "__main__":
    from specir.guard.process import stage_main
    sys.exit(stage_main(lambda job: JOBS[job["kind"]](job), sys.argv[1:]))
