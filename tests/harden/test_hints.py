"""Every located error gives a `hint:` line (issue 11 found about 15 without one). A static check
over the sources: each SpecirError built with a location, and each helper that builds located
errors (the verifier's `_error`, type rules' TypeRuleError, the pipeline-string parser's `fail`,
the workloads' `_error`), is given a hint."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPERS = {"_error": 4, "TypeRuleError": 2, "fail": 3}  # helper -> positional arguments that include the hint


def _calls_without_hint(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        keywords = {k.arg for k in node.keywords}
        if "hint" in keywords or any(k.arg is None for k in node.keywords):
            continue
        if name == "SpecirError" and "location" in keywords:
            yield node.lineno
        elif name in HELPERS and len(node.args) < HELPERS[name] and path.name != "inflate.py":
            yield node.lineno


def test_located_errors_have_hints():
    missing = [f"{path.relative_to(ROOT)}:{line}"
               for folder in ("specir", "passes", "backends")
               for path in sorted((ROOT / folder).rglob("*.py"))
               for line in _calls_without_hint(path)]
    assert not missing, "located errors without a hint: " + ", ".join(missing)
