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


class _Prediction:
    def __init__(self, speedup):
        self.speedup = speedup

    def as_dict(self):
        return {"speedup": self.speedup}


def _search_over(spec, tmp_path, space, monkeypatch):
    """A Search with `space`, its pipeline loaded and the cost model stubbed (no baseline, no profile):
    the space set-up of run() and score() as the loop sees them."""
    from specir.load import load_pipeline
    from specir.search.run import Search, Settings
    from specir.targets import get_target
    import specir.prediction
    monkeypatch.setattr(specir.prediction, "predict", lambda pipeline, *a, **k: _Prediction(1.5))
    search = Search(Settings(spec=str(spec), target="cpu", out=str(tmp_path / "s"), space=space))
    search.pipeline, search.target = load_pipeline(str(spec)), get_target("cpu")
    search.calibration = search.profile = search.overhead_scale = None
    search.space = Space.from_registry()
    return search


def test_the_search_scores_only_the_space_and_the_input(search_pair, tmp_path, monkeypatch):
    spec, _ = search_pair
    search = _search_over(spec, tmp_path, ["draft-shape{k=2}", "tree-verify{budget=8,topk=2}",
                                           "draft-shape{k=2},draft-shape{k=2}"], monkeypatch)
    pool = search._finite_space()
    assert [search.space.spell(p) for p in pool][:2] == ["draft-shape{k=2}", "tree-verify{budget=8,topk=2}"]
    parse = search.space.parse
    assert search.score(parse("draft-shape{k=2}")) and search.score(parse("tree-verify{budget=8,topk=2}"))
    assert search.score(()) is not None  # the input is always timed
    assert search.score(parse("draft-shape{k=4}")) is None  # outside the space (the input is k = 3)
    assert search.score(parse("tree-verify{budget=16}")) is None
    assert search._score(parse("draft-shape{k=4}")) is not None  # a valid candidate, only outside the space


def test_a_space_where_nothing_compiles_is_one_error(search_pair, tmp_path, monkeypatch):
    spec, _ = search_pair
    search = _search_over(spec, tmp_path, ["two-level-verify{}"], monkeypatch)
    monkeypatch.setattr(search, "_score", lambda steps: None)
    with pytest.raises(SpecirError, match="no pipeline of the space compiles"):
        search._finite_space()


def test_a_bad_space_entry_stops_before_the_folder_keeps_its_settings(search_pair, tmp_path):
    from specir.search.run import Search, Settings
    spec, _ = search_pair
    out = tmp_path / "s"
    search = Search(Settings(spec=str(spec), target="cpu", out=str(out), space=["draft-shape{k=2}",
                                                                              "tree-verify{budjet=8}"]))
    with pytest.raises(SpecirError, match=r"space entry 2 `tree-verify\{budjet=8\}`: unknown option 'budjet'"):
        search.prepare()
    assert not any(out.iterdir())  # nothing stored: a corrected space starts the same folder afresh


def test_space_file_names_unknown_passes_and_options_at_their_line(tmp_path):
    f = tmp_path / "space.txt"
    f.write_text("draft-shape{k=2}\ntree-verify{budjet=8}\n")
    with pytest.raises(SpecirError, match="unknown option 'budjet'") as e:
        read_space_file(str(f))
    assert e.value.location.line == 2 and e.value.location.column == 13
    f.write_text("tree-verfy\n")
    with pytest.raises(SpecirError, match="unknown pass 'tree-verfy'") as e:
        read_space_file(str(f))
    assert "did you mean 'tree-verify'" in e.value.hint
    assert read_space_file(str(f), plugins=True) == ["tree-verfy"]  # a --plugin pass, described later
