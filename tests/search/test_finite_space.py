"""A finite search space (`specir search --space FILE`): the proposer ranks the whole pool with the
cost model and never leaves it; the file's lines parse with their location in errors."""
import random

import pytest

from specir.errors import SpecirError
from specir.search.proposer import Proposer
from specir.search.space import Space
from specir.search.space_file import read_space_file

POOL = ["draft-shape{k=2}", "draft-shape{k=6}", "tree-verify{budget=16}", "tree-verify{budget=64,topk=8}",
        "tree-verify{depth=6,topk=8}", "ngram-draft{k=4}"]
PREDICTED = {"draft-shape{k=2}": 1.5, "draft-shape{k=6}": 2.0, "tree-verify{budget=16}": 2.2,
             "tree-verify{budget=64,topk=8}": 2.9, "tree-verify{depth=6,topk=8}": 3.1, "ngram-draft{k=4}": 1.2}


def _propose_all(pool_order):
    space = Space.from_registry()
    pool = [space.parse(t) for t in pool_order]
    allowed = {space.spell(p) for p in pool} | {""}

    def score(steps):  # the search's score: None outside the finite space
        key = space.spell(steps)
        if key not in allowed:
            return None
        return (key, PREDICTED.get(key, 1.0), "x", {}, None)
    proposer = Proposer(space, score, rng=random.Random(0), pool=pool)
    taken, history, order = set(), [], []
    while (steps := proposer.next(history, taken)) is not None:
        key = space.spell(steps)
        assert key in allowed and key not in taken
        order.append(key)
        taken.add(key)
        history.append({"passes": key, "status": "validated", "kind": "x", "measured": {"speedup": PREDICTED.get(key, 1.0)},
                        "predicted": {"speedup": PREDICTED.get(key, 1.0)}})
    return order


def test_the_pool_is_ranked_by_the_cost_model_and_exhausted_without_leaving_it():
    order = _propose_all(POOL)
    assert order[0] == ""  # the input first
    assert order[1:5] == sorted(POOL, key=lambda t: -PREDICTED[t])[:4]
    assert sorted(order) == sorted(POOL + [""])  # every member once, nothing else


def test_the_ranking_does_not_depend_on_the_file_order():
    assert _propose_all(POOL)[:5] == _propose_all(list(reversed(POOL)))[:5]


def test_space_file_lines_comments_and_the_input(tmp_path):
    f = tmp_path / "space.txt"
    f.write_text("# the gpu space\n(input)\n\ndraft-shape{k=2}   # a chain\ntree-verify{budget=64,topk=8}\n-\n")
    assert read_space_file(str(f)) == ["", "draft-shape{k=2}", "tree-verify{budget=64,topk=8}", ""]


def test_a_bad_line_is_an_error_at_its_line(tmp_path):
    f = tmp_path / "space.txt"
    f.write_text("draft-shape{k=2}\n  tree-verify{budget=64\n")
    with pytest.raises(SpecirError) as e:
        read_space_file(str(f))
    assert e.value.location.file == str(f) and e.value.location.line == 2 and e.value.location.column > 2
    assert "unclosed" in e.value.message
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(SpecirError, match="lists no pipeline"):
        read_space_file(str(tmp_path / "empty.txt"))
    with pytest.raises(SpecirError, match="cannot read the space file"):
        read_space_file(str(tmp_path / "missing.txt"))
