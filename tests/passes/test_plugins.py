"""Custom passes: loaded from a file with --plugin and through the specir.passes entry points."""
from __future__ import annotations

from pathlib import Path

from specir.pass_infra import Pass, registry

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_pass.py"


def test_example_plugin_from_cli(tmp_path, specir_cli, pair):
    target, drafter = pair
    code, spec_text, err = specir_cli("init", "--target-model", target, "--drafter", drafter)
    assert code == 0, err
    spec = tmp_path / "p.spec"
    spec.write_text(spec_text)
    code, out, err = specir_cli("opt", spec, "--plugin", EXAMPLE, "-p", "widen-draft{extra=3},canonicalize",
                                "--print-after-all")
    assert code == 0, err
    assert "draft.chain @drafter, %ctx {k = 7}" in out
    assert "// ----- IR after widen-draft{extra=3} -----" in err



def test_plugin_on_the_old_import_path(tmp_path, specir_cli, pair):
    """Plugins in the wild import `from specir.pass_base import Option, Pass`: that path stays."""
    plugin = tmp_path / "old_path.py"
    text = EXAMPLE.read_text().replace("from specir.pass_infra import", "from specir.pass_base import")
    plugin.write_text(text.replace('name = "widen-draft"', 'name = "old-path-widen"'))  # the CLI runs in-process
    assert "from specir.pass_base import Option, Pass" in plugin.read_text()
    target, drafter = pair
    spec = tmp_path / "p.spec"
    spec.write_text(specir_cli("init", "--target-model", target, "--drafter", drafter)[1])
    code, out, err = specir_cli("opt", spec, "--plugin", plugin, "-p", "old-path-widen{extra=3}")
    assert code == 0, err
    assert "draft.chain @drafter, %ctx {k = 7}" in out

def test_broken_plugin_reports_its_line(tmp_path, specir_cli, pair):
    plugin = tmp_path / "bad.py"
    plugin.write_text("from specir.pass_infra import Pass\n\nx = 1 / 0\n")
    code, out, err = specir_cli("opt", "whatever.spec", "--plugin", plugin)
    assert code == 2 and f"{plugin}:3:1: error: plugin failed to load: ZeroDivisionError" in err


def test_plugin_that_breaks_the_ir_is_named(tmp_path, specir_cli, pair):
    plugin = tmp_path / "breaker.py"
    plugin.write_text(
        "from dataclasses import replace\nfrom specir.pass_infra import Pass\n\n"
        "class DropCommit(Pass):\n    name = 'drop-commit'\n\n"
        "    def run(self, p):\n        return replace(p, step=replace(p.step, ops=p.step.ops[:-1]))\n")
    target, drafter = pair
    spec = tmp_path / "p.spec"
    spec.write_text(specir_cli("init", "--target-model", target, "--drafter", drafter)[1])
    code, out, err = specir_cli("opt", spec, "--plugin", plugin, "-p", "canonicalize,drop-commit")
    assert code == 2
    assert "pass drop-commit produced invalid IR (passes run before it: canonicalize)" in err
    assert "the step must end with exactly one commit" in err


def test_entry_point_group(monkeypatch):
    class FromEntryPoint(Pass):
        name = "from-entry-point"

        def run(self, p):
            return p

    class EP:
        name, value = "demo", "demo:FromEntryPoint"

        def load(self):
            return FromEntryPoint

    import importlib.metadata as md
    monkeypatch.setattr(md, "entry_points", lambda group=None: [EP()] if group == "specir.passes" else [])
    registry.load_entry_points()
    assert registry.get("from-entry-point") is FromEntryPoint


def test_required_fact_is_enforced(tmp_path, specir_cli, pair):
    plugin = tmp_path / "needs.py"
    plugin.write_text("from specir.pass_infra import Pass\n\nclass NeedsTree(Pass):\n    name = 'needs-tree'\n"
                      "    requires = frozenset({'tree-verify'})\n\n    def run(self, p):\n        return p\n")
    target, drafter = pair
    spec = tmp_path / "p.spec"
    spec.write_text(specir_cli("init", "--target-model", target, "--drafter", drafter)[1])
    code, _, err = specir_cli("opt", spec, "--plugin", plugin, "-p", "needs-tree")
    assert code == 2 and "requires fact 'tree-verify'" in err and "run tree-verify before it" in err
    code, out, err = specir_cli("opt", spec, "--plugin", plugin, "-p", "tree-verify,needs-tree")
    assert code == 0, err
