"""draft.tree {topk_at}: fewer children per node as the live batch grows (batch-fusion{narrow=true}),
lossless on the reference and Triton backends; the rule keeps the nodes a budget keeps as likely."""
from __future__ import annotations

import types

import pytest

from specir.errors import SpecirError
from specir.ir.parser import parse
from specir.ir.printer import print_pipeline
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from specir.runtime.session import make_engine
from specir.step.ops.draft_tree import narrow, topk_now
from tests.triton_backend.pipelines import PROMPTS, forced, pipeline


def test_the_rule_picks_the_fewest_children_that_keep_the_best_nodes():
    """alpha 0.85, depth 6, topk 8: six nodes per request are the top-choice chain (topk 1); 7-10
    need a second child somewhere, 16 four, 37 six; the table's repeated tail is dropped."""
    op = types.SimpleNamespace(attrs={"depth": 6, "topk": 8, "budget": 64})
    assert narrow(op, None, 0.85, [37, 16, 7, 6, 6, 6]) == {"topk_at": (6, 4, 2, 1)}
    assert narrow(op, None, 0.85, [64] * 4) == {}  # the whole tree: nothing narrower
    # four nodes per request are never deeper than four: the levels narrow too ...
    assert narrow(op, None, 0.85, [37, 16, 4]) == {"topk_at": (6, 4, 1), "depth_at": (6, 6, 4)}
    # ... unless one request may keep more than its share (a budget split by confidence)
    assert narrow(op, None, 0.85, [37, 16, 4], [37, 32, 5]) == {"topk_at": (6, 4, 1), "depth_at": (6, 6, 5)}
    assert narrow(op, None, 0.85, [37, 16, 4], [37, 32, 256]) == {"topk_at": (6, 4, 1)}
    assert [topk_now(types.SimpleNamespace(attrs={"topk": 8, "topk_at": (8, 4, 1)}), b) for b in (0, 1, 2, 3, 9)] \
        == [8, 8, 4, 1, 1]


def test_batch_fusion_narrow_sets_topk_at_and_needs_a_budget(tiny_pair):
    target, drafter = tiny_pair
    tree = pipeline("tree", target, drafter)
    p = PassManager(build_passes("batch-fusion{shrink=false,budget=3,narrow=true,max_batch=4}")).run(tree)
    draft = next(op for op in p.step.ops if op.name == "draft.tree")
    assert draft.attrs["topk_at"] == (2, 1)  # 3 nodes for one request: a sibling too; 2 or fewer: the chain
    with pytest.raises(SpecirError, match="narrow"):
        PassManager(build_passes("batch-fusion{shrink=false,narrow=true}")).run(tree)


def test_topk_at_past_topk_is_a_type_error(tiny_pair):
    target, drafter = tiny_pair
    text = print_pipeline(pipeline("tree", target, drafter)).replace("topk = 2}", "topk = 2, topk_at = [3]}")
    with pytest.raises(SpecirError, match="topk_at entries must be integers between 1 and topk"):
        load_pipeline("<test>", text=text)
    text = print_pipeline(pipeline("tree", target, drafter)).replace("topk = 2}", "topk = 2, depth_at = [0]}")
    with pytest.raises(SpecirError, match="depth_at entries must be integers between 1 and depth"):
        load_pipeline("<test>", text=text)


@pytest.mark.parametrize("backend", ["reference", "triton"])
@pytest.mark.parametrize("narrowing,levels", [("topk_at = [2, 1]", {("tree-level", 1, 2), ("tree-level", 2, 2)}),
                                              ("topk_at = [2, 1], depth_at = [2, 1]", {("tree-level", 2, 2)})])
def test_a_narrowed_tree_is_lossless_as_the_batch_changes(tiny_pair, device, backend, narrowing, levels):
    """topk_at = [2, 1]: two live requests draft a chain (one child per node), the one left the full
    tree; the two shapes' level forwards are both built, every token is forced, drafted tokens are
    accepted under both. With depth_at = [2, 1] too, two live requests draft the root's children
    only (no level forward runs)."""
    target, drafter = tiny_pair
    p = PassManager(build_passes("batch-fusion{shrink=false,budget=8}")).run(pipeline("tree", target, drafter))
    p = parse(print_pipeline(p).replace("topk = 2}", f"topk = 2, {narrowing}}}"))
    engine = make_engine(p, backend, device if backend == "triton" else "cpu", None)
    decode = engine.open(2, engine.rows_needed(8, 8), sampling=False)
    short, long_ = decode.add(PROMPTS[1], 3), decode.add(PROMPTS[0], 8)
    while decode.active():
        decode.step()
    forwards = decode.session.ctx.state("drafter", "draft").forwards
    assert {k for k in forwards if k[0] == "tree-level"} == levels, list(forwards)
    report = forced(p, target, [short.prompt, long_.prompt], [short.generated, long_.generated])
    assert report.checked == 11 and report.mismatches == 0, report.as_dict()


def test_the_shrink_table_prices_the_narrowed_draft(tiny_pair):
    """batch_schedule.step_forwards(live=b): draft.tree's at_live resolves topk_at, so the table
    prices one fed row per request per level where the tree is a chain."""
    from specir.batch_schedule import step_forwards
    target, drafter = tiny_pair
    p = PassManager(build_passes("batch-fusion{shrink=false,budget=8}")).run(pipeline("tree", target, drafter))
    p = parse(print_pipeline(p).replace("topk = 2}", "topk = 2, topk_at = [2, 1]}"))
    level = lambda live: [f for f in step_forwards(p, live)[2] if f.purpose == "tree-level"][0]  # noqa: E731
    assert (level(1).tokens, level(1).ranked) == (2, 2) and (level(3).tokens, level(3).ranked) == (1, 1)
    assert [f.tokens for f in step_forwards(p)[2] if f.purpose == "tree-level"] == [2]  # unresolved: topk


def test_a_narrowing_that_never_settles_keeps_the_widest_priced_as_printed(tiny_pair, monkeypatch):
    """When narrowing and repricing alternate (a cheaper draft lifts a zero of the table and back),
    batch-fusion narrows for the most nodes any visited table kept (the widest narrowing it
    derived) and prints the table priced for it. Here the chain-priced draft gets a table of 3
    drafted tokens (the tree at one live request), the tree-priced one a table of 2 (the chain)."""
    from specir.passes.batch_fusion import BatchFusion
    target, drafter = tiny_pair
    tree = pipeline("tree", target, drafter)
    priced = []

    def alternating(self, p):
        topk_at = next(o for o in p.step.ops if o.name == "draft.tree").attrs.get("topk_at")
        priced.append(topk_at)
        return [3 if topk_at == (1,) else 2] * self.max_batch
    monkeypatch.setattr(BatchFusion, "_table", alternating)
    p = PassManager(build_passes("batch-fusion{shrink=false,budget=3,narrow=true,max_batch=4}")).run(tree)
    assert next(op for op in p.step.ops if op.name == "draft.tree").attrs["topk_at"] == (2, 1)
    assert priced == [None, (1,), (2, 1), (2, 1)] and priced[-1] == (2, 1)


def test_the_levels_narrow_to_what_one_request_can_keep(tiny_pair):
    """budget 2 over 2 live requests: split equally each keeps 1 node (a depth-1 tree does), by
    confidence one request may keep both (depth 2 stays)."""
    target, drafter = tiny_pair
    tree = pipeline("tree", target, drafter)
    depth_at = lambda split: next(op for op in PassManager(build_passes(  # noqa: E731
        f'batch-fusion{{shrink=false,budget=2,narrow=true,max_batch=2,split="{split}"}}')).run(tree).step.ops
        if op.name == "draft.tree").attrs.get("depth_at")
    assert depth_at("equal") == (2, 1) and depth_at("confidence") in (None, ())
