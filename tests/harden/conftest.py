"""Shared helpers of the hardening tests (issue 11): the error-shape assertion of tests/ir/test_cli_errors.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.specs import write_spec


def assert_error(result, message: str, where: str | None = None, caret_under: str | None = None,
                 hint: str | None = "") -> str:
    """One clear message: exit 2, no traceback, `where: error: ...` first, the message, a caret under
    `caret_under`, and a `hint:` line (containing `hint` when given)."""
    code, out, err = result
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert message in err, err
    first = err.splitlines()[0]
    assert "error:" in first, err
    if where:
        assert first.startswith(where), first
    if caret_under is not None:
        lines = err.splitlines()
        idx = next(i for i, line in enumerate(lines) if line.strip().startswith("^"))
        col = lines[idx].index("^")
        assert lines[idx - 1][col:].startswith(caret_under), (lines[idx - 1], col)
    if hint is not None:
        hints = [line for line in err.splitlines() if line.strip().startswith("hint:")]
        assert hints and hint in hints[0], err
    return err


@pytest.fixture
def ngram_spec(tmp_path, pair) -> Path:
    """An n-gram pipeline on the pair's target (vocab 259)."""
    return write_spec(tmp_path, "p", pair[0])


@pytest.fixture(autouse=True)
def _restore_pass_registry():
    """Plugins these tests load register passes process-wide: drop them afterwards, so that other
    tests in this worker (e.g. the golden-case coverage of built-in passes) see the built-in set."""
    from specir.pass_infra import registry
    registry.load_builtin()
    saved = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
