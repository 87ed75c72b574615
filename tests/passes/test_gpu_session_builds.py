"""bench/h200_session.py's named builds are pass pipelines that `specir opt` accepts on a small pair: a GPU call
never spends its device time on a misspelled pipeline. tree-fr's shape family (`tree-fr-d<depth>k<topk>b<budget>`)
spells a tree of that shape (`v<size>`: its draft vocabulary); any other unknown name is an error."""
from __future__ import annotations

import re

import pytest

from tests.helpers.bench_scripts import load_bench_script
from tests.helpers.specs import write_spec

h200_session = load_bench_script("h200_session")


def test_the_shape_family_spells_its_tree():
    assert h200_session.build_passes("tree-fr-d10k4b64") == (
        "tree-verify{budget=64,topk=4,depth=10},draft-vocab{size=32768,order=frequency}")
    assert h200_session.build_passes("tree-fr-d10k8b63v16384") == (
        "tree-verify{budget=63,topk=8,depth=10},draft-vocab{size=16384,order=frequency}")
    assert h200_session.build_passes("tree-fr") == h200_session.FR
    with pytest.raises(KeyError):
        h200_session.build_passes("tree-fr-d10k4")


@pytest.mark.parametrize("name", [*sorted(h200_session.BUILDS), "tree-fr-d10k8b64", "tree-fr-d14k8b96",
                                  "tree-fr-d10k8b63v16384"])
def test_a_named_build_is_a_valid_pipeline(name, pair, tmp_path, specir_cli):
    spec = write_spec(tmp_path, "p", pair[0], "none" if name in h200_session.AR_BUILDS else pair[1], k=3)
    passes = h200_session.build_passes(name)
    code, out, err = specir_cli("opt", spec, *(["-p", passes] if passes else []))
    assert code == 0, f"{name}: {passes}: {err}"
    depth = re.search(r"depth=(\d+)", passes)
    if depth:
        assert f"depth = {depth.group(1)}" in out
