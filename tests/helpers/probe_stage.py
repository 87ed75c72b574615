"""A guard stage for the stage-server tests: `python -m tests.helpers.probe_stage JOB OUT`.

It prints the job's `say` lines (stdout, then stderr), then per the job: imports `load` (a module path; the next
stage must not see it), starts a grandchild that sleeps (`grandchild`: its pid is written to the job's `pid_file`),
sleeps `sleep` seconds, exits with `exit` without writing OUT; with `cuda` runs a GPU op and writes its result;
else writes where and how it ran."""
from __future__ import annotations

import os
import subprocess
import sys
import time


def probe(job: dict) -> dict:
    for line in job.get("say", []):
        print(line, flush=True)
        print(f"err: {line}", file=sys.stderr, flush=True)
    if job.get("load"):
        import importlib.util
        spec = importlib.util.spec_from_file_location("probe_loaded_module", job["load"])
        module = importlib.util.module_from_spec(spec)
        sys.modules["probe_loaded_module"] = module
        spec.loader.exec_module(module)
    if job.get("grandchild"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(job["pid_file"], "w") as f:
            f.write(str(child.pid))
    time.sleep(job.get("sleep", 0))
    if "exit" in job:
        os._exit(job["exit"])
    from specir.pass_infra.registry import foreign_code_loaded
    if job.get("cuda"):  # a GPU op in the stage: the server it was forked from must not have started CUDA
        import torch
        return {"cuda_sum": float(torch.arange(4, device="cuda", dtype=torch.float32).sum().item())}
    return {"pid": os.getpid(), "sid": os.getsid(0), "cwd": os.getcwd(), "argv_ok": len(sys.argv) == 3,
            "variable": os.environ.get("SPECIR_PROBE_VARIABLE"), "foreign": foreign_code_loaded(),
            "saw_loaded": "probe_loaded_module" in sys.modules, "stdin_empty": sys.stdin.read() == ""}


if __name__ == "__main__":
    from specir.guard.process import stage_main
    sys.exit(stage_main(probe, sys.argv[1:]))
