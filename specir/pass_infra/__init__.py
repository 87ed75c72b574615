"""The pass machinery: what a pass is, how passes are named, found, spelled and run.

- `base`: the `Pass` base class and its typed `Option`s (plus the per-model `models` option).
- `registry`: the built-in passes (specir.passes), `--plugin FILE.py` plugins and the
  `specir.passes` entry-point group, by name.
- `pipeline`: pipeline strings `pass-a{k=v},pass-b` -> pass instances (errors point into the string).
- `manager`: `PassManager`, which runs passes in order, checks their facts and verifies the IR
  after each one.

A plugin imports `from specir.pass_infra import Option, Pass` (`specir.pass_base` stays as an alias).
"""
from . import registry
from .base import Option, Pass, models_option, selected_models
from .manager import PassManager, facts_of
from .pipeline import build_passes, parse_pipeline_string
from .registry import all_passes, foreign_code_loaded, load_plugin, provider_of, register

__all__ = [
    "Option", "Pass", "PassManager", "all_passes", "build_passes", "facts_of", "foreign_code_loaded",
    "load_plugin", "models_option", "parse_pipeline_string", "provider_of", "register", "registry",
    "selected_models",
]
