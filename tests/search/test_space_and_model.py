"""The search space, the proposer and the cost model, in process (no candidate is run)."""
from __future__ import annotations

import random

import pytest

from specir.acceptance_model import Profile, Sequence, rank_tree
from specir.ir.nodes import Attrs, Op
from specir.pass_infra import all_passes
from specir.search.proposer import Proposer
from specir.search.report import spearman
from specir.search.space import Space


def test_every_builtin_option_declares_what_a_search_tries():
    for name, cls in all_passes().items():
        for key, opt in cls.options.items():
            values = opt.search_values()
            assert values, (name, key)
            assert opt.choices or opt.search is not None or opt.type is bool, f"{name}.{key} declares no range"
            for v in values:
                assert opt.convert(v) == v, (name, key, v)  # every searched value is a valid value


def test_option_max_is_enforced_and_described():
    from specir.errors import SpecirError
    cls = all_passes()["draft-shape"]
    with pytest.raises(SpecirError, match=r"must be an integer >= 1 and <= 16, got '17'"):
        cls(k="17")


def test_neighbours_change_options_add_drop_and_swap():
    space = Space.from_registry()
    start = space.parse("draft-shape{k=2},tree-verify")
    spelled = {space.spell(n) for n in space.neighbours(start)}
    assert "draft-shape{k=3},tree-verify" in spelled
    assert "tree-verify" in spelled and "draft-shape{k=2}" in spelled
    assert "tree-verify,draft-shape{k=2}" in spelled
    assert any(s.startswith("draft-shape{k=2},tree-verify,pack-weights") for s in spelled)
    assert space.spell(space.parse("tree-verify{budget=8,topk=2}")) == "tree-verify{budget=8,topk=2}"


def test_the_proposer_starts_with_the_input_and_never_repeats_a_digest():
    space = Space.from_registry()
    # a toy score: the digest ignores default-valued options, like the IR does
    def score(steps):
        key = space.spell(steps)
        return (key, 1.0 + 0.1 * len(steps), "x", {}, None)
    proposer = Proposer(space, score, seeds=[space.parse("draft-shape{k=2}")], rng=random.Random(1))
    taken, history = set(), []
    first = proposer.next(history, taken)
    assert first == ()
    for _ in range(12):
        taken.add(space.spell(first))
        history.append({"passes": space.spell(first), "status": "validated", "measured": {"speedup": 1.0},
                        "predicted": {"speedup": 1.0}, "kind": "x"})
        first = proposer.next(history, taken)
        assert first is not None and space.spell(first) not in taken
    assert space.spell(history[1]["passes"] and space.parse(history[1]["passes"])) == "draft-shape{k=2}"


def _profile():
    # ranks: 0 = the drafter's first choice is the target's token
    return Profile([Sequence([1, 2, 3, 1, 2], [3, 1, 2, 3, 9, 9, 1, 2], [0, 0, 1, 0, 0, 0, 2, 0])], "d")


def test_chain_acceptance_is_simulated_exactly_from_the_ranks():
    p = _profile()
    # k=2 over ranks 0 0 1 0 0 0 2 0: steps accept 2 (+1), then rank 1 stops at 0 (+1), 2 (+1), 0 (+1): 8 tokens
    tau = p.tau(Op("draft.chain", ("@d", "%ctx"), Attrs({"k": 2})))
    assert tau == pytest.approx(8 / 4)
    assert p.acceptance_by_rank(3) == pytest.approx([6 / 8, 1 / 8, 1 / 8])
    assert p.tau(None) == 1.0


def test_a_tree_holds_the_chain_and_accepts_at_least_as_much():
    p = _profile()
    chain = p.tau(Op("draft.chain", ("@d", "%ctx"), Attrs({"k": 3})))
    tree = p.tau(Op("draft.tree", ("@d", "%ctx"), Attrs({"depth": 3, "topk": 3, "budget": 12})))
    assert tree >= chain
    nodes = rank_tree([0.7, 0.2, 0.1], depth=2, topk=2, budget=4)
    assert (0,) in nodes and (0, 0) in nodes and len(nodes) == 4


def test_ngram_acceptance_follows_the_lookup_rule():
    from specir.step.ops.draft_ngram import lookup
    seq = Sequence([5, 6, 7, 5, 6], [7, 5, 6, 8], [])
    p = Profile([seq], None)
    proposal = lookup([5, 6, 7, 5, 6], 3, 3, 1)
    assert proposal == [7, 5, 6]
    tau = p.tau(Op("draft.ngram", ("%ctx",), Attrs({"k": 3})))
    assert tau == pytest.approx(4 / 1)  # one step: 3 drafted tokens accepted, then the target's own


PINNED = [([1, 2, 3, 1, 2, 3], [1, 2, 4, 1, 2, 4, 1, 2, 3, 3], [0, 0, 1, 0, 0, 3, 0, 2, 0, 0]),
          ([5, 6, 5, 6, 7], [5, 6, 7, 7, 5, 6, 7, 5], [0, 1, 0, 0, 0, 0, 1, 0])]


@pytest.mark.parametrize("name, attrs, alone, two_level", [
    ("draft.chain", {"k": 3}, 2.25, 18 / 7),
    ("draft.ngram", {"k": 3}, 2.0, 3.0),
    ("draft.ngram", {"k": 4, "max_ngram": 2, "min_ngram": 2}, 1.8, 18 / 7),
    ("draft.tree", {"depth": 3, "topk": 2, "budget": 6}, 18 / 7, 18 / 7),
    ("draft.tree", {"depth": 4, "topk": 3, "budget": 20, "expand": "dynamic", "threshold": 0.1}, 18 / 7, 18 / 7),
])
def test_each_draft_ops_acceptance_rule_gives_the_pinned_tau(name, attrs, alone, two_level):
    """The rules the draft ops declare (StepInterfaces.accepted) give the taus the acceptance model
    gave when it held them itself (values pinned from that version), alone and under a cascade."""
    p = Profile([Sequence(*s) for s in PINNED], "d")
    mid = [[0, 0, 0, 1, 0, 0, 0, 0, 2, 0], [0, 0, 0, 0, 0, 1, 0, 0]]
    op = Op(name, ("@d", "%ctx"), Attrs(attrs))
    assert p.tau(op) == pytest.approx(alone)
    assert p.tau(op, Op("draft.cascade", ("@m", "%ctx", "%d"), Attrs({"extend": 2})), mid) == pytest.approx(two_level)


def test_a_draft_op_without_an_acceptance_rule_is_an_error_naming_it(monkeypatch):
    from dataclasses import replace

    from specir.errors import SpecirError
    from specir.ir.opdefs import OPS
    chain = OPS["draft.chain"]
    silent = replace(chain, name="draft.silent", step=replace(chain.step, accepted=None))
    monkeypatch.setitem(OPS, "draft.silent", silent)
    with pytest.raises(SpecirError, match="'draft.silent' declares no acceptance rule"):
        _profile().tau(Op("draft.silent", ("@d", "%ctx"), Attrs({"k": 2})))


def test_prediction_and_gap_report_on_the_shipped_pair():
    from specir.calibration import Calibration
    from specir.compiler import optimise
    from specir.prediction import gaps, predict
    from specir.pipeline_template import default_spec_text
    from specir.targets import get_target
    import specir.load
    target = get_target("cpu")
    cal = Calibration("cpu", "test", 1e10, 1e11, 1e-5)
    base = specir.load.load_pipeline("<default>", text=default_spec_text())
    p = predict(base, target, cal, _profile())
    g = gaps(p)
    assert p.speedup > 0 and g["biggest"] in ("draft", "verify", "acceptance", "overhead")
    assert all(v >= p.speedup - 1e-9 for v in g["with_limit_lifted"].values())


def test_a_build_that_never_drafts_is_predicted_as_ar():
    """batch-fusion's CPU table turns the shipped chain off from one live request (off_at = 1): the
    search's prediction is then AR's step with tau 1 (speedup 1.0), as compile reports it; the same
    chain drafting at every batch size is predicted below 1 on the CPU."""
    from specir.calibration import Calibration
    from specir.pass_infra import PassManager, build_passes
    from specir.pipeline_template import default_spec_text
    from specir.prediction import predict
    from specir.targets import get_target
    import specir.load
    target = get_target("cpu")
    cal = Calibration("cpu", "test", 1e10, 2.8e10, 4.4e-5)
    base = specir.load.load_pipeline("<default>", text=default_spec_text())
    off = PassManager(build_passes("batch-fusion{target=cpu}")).run(base)
    drafting = PassManager(build_passes("batch-fusion{target=cpu,shrink=false}")).run(base)
    p = predict(off, target, cal, _profile())
    assert p.tau == 1.0 and p.speedup == pytest.approx(1.0) and p.step.draft == 0.0
    assert predict(drafting, target, cal, _profile()).speedup < 1.0


def test_step_time_puts_the_draft_ops_forwards_under_draft():
    """step_time splits seconds by the op's declared role: every built-in draft.* op's parts are
    draft time, the rest verify time (the split the name prefix gave)."""
    import specir.load
    from specir.calibration import Calibration
    from specir.pipeline_template import default_spec_text
    from specir.step_time import step_time
    from specir.targets import get_target
    base = specir.load.load_pipeline("<default>", text=default_spec_text())
    t = step_time(base, get_target("cpu"), Calibration("cpu", "test", 1e10, 1e11, 1e-5))
    forwards = [p for p in t.parts if "model" in p]
    assert t.draft > 0 and t.draft == pytest.approx(sum(p["seconds"] for p in forwards if p["op"].startswith("draft.")))
    assert t.verify == pytest.approx(sum(p["seconds"] for p in forwards if not p["op"].startswith("draft.")))


def test_calibration_is_cached_per_machine_and_versioned(tmp_path, monkeypatch):
    from specir import calibration as cal
    from specir.targets import get_target
    monkeypatch.setenv("SPECIR_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr(cal, "measure", lambda t: calls.append(1) or cal.Calibration(t.name, cal.machine_id(), 1.0,
                                                                                       2.0, 3.0))
    target = get_target("cpu")
    assert cal.calibration(target).op_seconds == 3.0 and cal.calibration(target).op_seconds == 3.0
    assert len(calls) == 1
    monkeypatch.setattr(cal, "VERSION", cal.VERSION + 1)
    cal.calibration(target)
    assert len(calls) == 2  # another version measures again


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2], [1, 2]) is None
