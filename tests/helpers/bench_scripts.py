"""Load a script of bench/ as a module (the scripts are not a package), for their smoke tests."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench_script(name: str):
    """bench/<name>.py as module `<name>_bench`; registered in sys.modules (dataclasses need it).
    bench/ goes on sys.path, as when the script runs, for the modules the scripts share."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
