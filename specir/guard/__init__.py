"""The losslessness guard (DESIGN.md section 7): what `specir check` and the search's gate run.

- `declared.py`: the declared target of what is checked (a build's manifest, or a .spec's text),
  read without importing any plugin;
- `child.py`: the only process that imports plugins or agent code; it compiles/opens the pipeline
  and generates tokens for the prompts it is given;
- `judge.py`: in the calling process (which never imports a plugin): runs the child, counts what
  came back, loads the declared target's checkpoint fresh and token-forces every token.
"""
from .judge import GuardRequest, Verdict, run_guard

__all__ = ["GuardRequest", "Verdict", "run_guard"]
