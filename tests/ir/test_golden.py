"""Golden IR tests: every tests/golden/<pass>/<case>.spec runs its pipeline string on its input
and must print exactly the expected output (or fail with the expected error)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specir.errors import SpecirError
from specir.ir.parser import parse
from specir.ir.printer import print_pipeline
from specir.ir.verifier import infer_types
from specir.pass_infra import PassManager, build_passes

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
MARK = "// ----- expected -----"
CASES = sorted(GOLDEN.rglob("*.spec"))


def split_case(path: Path) -> tuple[str, str, str]:
    text = path.read_text()
    header, rest = text.split("\n", 1)
    assert header.startswith("// pipeline:"), f"{path}: first line must be '// pipeline: ...'"
    source, expected = rest.split(MARK + "\n", 1)
    return header.split(":", 1)[1].strip(), source, expected


def run_case(pipeline_string: str, source: str, file: str) -> str:
    pipeline = infer_types(parse(source, file))
    return print_pipeline(PassManager(build_passes(pipeline_string)).run(pipeline))


@pytest.mark.parametrize("case", CASES, ids=[str(c.relative_to(GOLDEN)) for c in CASES])
def test_golden(case: Path):
    pipeline_string, source, expected = split_case(case)
    if expected.startswith("// error:"):
        with pytest.raises(SpecirError) as info:
            run_case(pipeline_string, source, str(case))
        assert expected.split(":", 1)[1].strip() in info.value.message
        return
    assert expected.strip(), f"{case}: no expected output; run with --update and review it"
    out = run_case(pipeline_string, source, str(case))
    assert out == expected
    assert print_pipeline(parse(out)) == out  # the expected output is itself canonical


def test_there_are_golden_cases_for_every_builtin_pass():
    from specir.pass_infra import registry
    covered = {c.parent.name for c in CASES}
    missing = set(registry.all_passes()) - covered
    assert not missing, f"passes without golden tests: {sorted(missing)}"


if __name__ == "__main__":  # python tests/ir/test_golden.py --update FILE...
    if sys.argv[1:2] == ["--update"]:
        for name in sys.argv[2:]:
            path = Path(name)
            pipeline_string, source, expected = split_case(path)
            if expected.startswith("// error:"):
                continue
            out = run_case(pipeline_string, source, str(path))
            path.write_text(f"// pipeline: {pipeline_string}\n{source}{MARK}\n{out}")
            print(f"updated {path}")
