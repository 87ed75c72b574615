"""Plugins that hang, exit or shadow built-in passes; `--plugin DIR`; zoo imports located at the
.spec line. A plugin import or pass that runs past --pass-timeout is stopped with a message naming it."""
from __future__ import annotations

import time

import pytest

from tests.harden.conftest import assert_error

LOOPING_PASS = """from specir.pass_infra import Pass


class Loop(Pass):
    name = "loop-forever"

    def run(self, pipeline):
        while True:
            pass
"""

EXITING_PASS = """import sys
from specir.pass_infra import Pass


class Leave(Pass):
    name = "leave-early"

    def run(self, pipeline):
        sys.exit(0)
"""

CLASHING_PASS = """from specir.pass_infra import Pass


class Mine(Pass):
    name = "tree-verify"

    def run(self, pipeline):
        return pipeline
"""


def _plugin(tmp_path, text, name="plugin.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_plugin_import_that_never_ends_is_stopped(tmp_path, specir_cli, ngram_spec):
    plugin = _plugin(tmp_path, "x = 0\nwhile True:\n    x += 1\n")
    start = time.monotonic()
    assert_error(specir_cli("opt", ngram_spec, "--plugin", plugin, "--pass-timeout", "1"),
                 "importing plugin plugin.py did not finish within 1 s", f"{plugin}:", hint="--pass-timeout")
    assert time.monotonic() - start < 30


def test_pass_that_never_ends_is_stopped_and_named(tmp_path, specir_cli, ngram_spec):
    plugin = _plugin(tmp_path, LOOPING_PASS)
    assert_error(specir_cli("opt", ngram_spec, "--plugin", plugin, "-p", "canonicalize,loop-forever",
                            "--pass-timeout", "0.5"),
                 "pass loop-forever did not finish within 0.5 s (passes run before it: canonicalize)", "-p:1:14",
                 "loop-forever", hint="--pass-timeout SECONDS")


def test_pass_timeout_must_be_a_number_of_seconds(specir_cli, ngram_spec):
    assert_error(specir_cli("opt", ngram_spec, "--pass-timeout", "-1"), "--pass-timeout must be a number of seconds",
                 hint="0 = no limit")


def test_plugin_calling_sys_exit_at_import(tmp_path, specir_cli, ngram_spec):
    plugin = _plugin(tmp_path, "import sys\nsys.exit(0)\n")
    out = tmp_path / "out.spec"
    assert_error(specir_cli("opt", ngram_spec, "--plugin", plugin, "-o", out),
                 "plugin plugin.py called sys.exit(0) while being imported", f"{plugin}:2:", hint="must not exit")
    assert not out.exists()


def test_pass_calling_sys_exit(tmp_path, specir_cli, ngram_spec):
    plugin = _plugin(tmp_path, EXITING_PASS)
    assert_error(specir_cli("opt", ngram_spec, "--plugin", plugin, "-p", "leave-early"),
                 "pass leave-early called sys.exit(0)", "-p:1:1", hint="must not exit the process")


def test_plugin_pass_named_like_a_built_in(tmp_path, specir_cli, ngram_spec):
    plugin = _plugin(tmp_path, CLASHING_PASS)
    err = assert_error(specir_cli("opt", ngram_spec, "--plugin", plugin, "-p", "tree-verify"),
                       f"pass name 'tree-verify' ({plugin}) is a built-in pass", f"{plugin}:4:1", "class Mine",
                       hint="another name")
    assert "passes/tree_verify.py" in err
    from specir.pass_infra import registry
    assert registry.get("tree-verify").__module__ == "specir.passes.tree_verify"


def test_plugin_argument_that_is_a_folder(tmp_path, specir_cli, ngram_spec):
    _plugin(tmp_path, LOOPING_PASS, "a.py")
    assert_error(specir_cli("opt", ngram_spec, "--plugin", tmp_path), f"--plugin '{tmp_path}' is a folder, not a "
                 "Python file", str(tmp_path), hint="this folder holds a.py")


def test_unknown_zoo_model_is_located_at_the_import(tmp_path, specir_cli):
    p = tmp_path / "z.spec"
    p.write_text('pipeline p {\n  model @target = import("zoo:code-targt")\n}\n')
    assert_error(specir_cli("opt", p), "no zoo model named 'code-targt'", f"{p}:2:3", "model @target",
                 hint="did you mean 'zoo:code-target'?")


@pytest.mark.parametrize("seconds", ["0", "5"])
def test_ordinary_passes_run_under_the_limit(tmp_path, specir_cli, pair, seconds):
    from tests.helpers.specs import write_spec
    p = write_spec(tmp_path, "p", pair[0], pair[1])
    code, out, err = specir_cli("opt", p, "-p", "tree-verify,canonicalize", "--pass-timeout", seconds)
    assert code == 0 and "draft.tree" in out, err
