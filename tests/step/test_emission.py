"""The emission curves the shrink table reads: a draft cut to its n most confident nodes, at
per-token acceptance alpha (specir/step/emission.py), and which op's curve a pipeline gets."""
from __future__ import annotations

import pytest

from specir.batch_schedule import emission_curve
from specir.load import load_pipeline
from specir.step.emission import chain_emission, tree_emission
from tests.helpers.specs import write_spec


def test_chain_curve_stops_at_its_depth():
    assert chain_emission(0.5, 3, 5) == [1.0, 1.5, 1.75, 1.875, 1.875, 1.875]


def test_tree_curve_is_the_best_first_trees_most_probable_nodes():
    # child ranks accepted with 0.5 and 0.25; level 2 expands both level-1 nodes by both children:
    # path probabilities 0.5, 0.25 | 0.25, 0.125, 0.125, 0.0625
    assert tree_emission(0.5, 2, 2, 6) == [1.0, 1.5, 1.75, 2.0, 2.125, 2.25, 2.3125]
    assert tree_emission(0.5, 2, 2, 3) == [1.0, 1.5, 1.75, 2.0]


def test_listed_order_keeps_a_trees_first_nodes_in_creation_order():
    # topk 3, alpha 0.5: level 1 is 0.5, 0.25, 0.125; level 2 starts 0.25 (under the first node)
    listed, confident = tree_emission(0.5, 2, 3, 12, "listed"), tree_emission(0.5, 2, 3, 12)
    assert listed[3] == 1.875 and confident[3] == 2.0  # the third listed node is the 0.125 sibling
    assert listed[-1] == confident[-1] and all(c >= v for c, v in zip(confident, listed))


@pytest.mark.parametrize("alpha", [0.3, 0.7, 0.9])
def test_a_tree_holds_its_chain_and_a_topk_1_tree_is_the_chain(alpha):
    chain, tree = chain_emission(alpha, 4, 20), tree_emission(alpha, 4, 3, 20)
    assert all(t >= c - 1e-12 for t, c in zip(tree, chain))
    assert tree[4] < chain[4] + 1e-12 or alpha < 0.5  # a sibling beats the deep path only when alpha < 1/2
    assert tree_emission(alpha, 4, 1, 4) == pytest.approx(chain_emission(alpha, 4, 4))


def test_pipelines_read_their_drafts_curve_through_the_budget_op(pair, tmp_path):
    target, drafter = pair
    tree = load_pipeline(write_spec(tmp_path, "t", target, drafter, k=4,
                                    passes="tree-verify{budget=10,topk=3,depth=3},batch-fusion{shrink=false,budget=8}"))
    assert emission_curve(tree, 0.8) == pytest.approx(tree_emission(0.8, 3, 3, 10))
    equal = load_pipeline(write_spec(tmp_path, "e", target, drafter, k=4,
                                     passes="tree-verify{budget=10,topk=3,depth=3},batch-fusion{shrink=false,budget=8,split=equal}"))
    assert emission_curve(equal, 0.8) == pytest.approx(tree_emission(0.8, 3, 3, 10, "listed"))
    chain = load_pipeline(write_spec(tmp_path, "c", target, drafter, k=4, passes="batch-fusion{shrink=false,budget=3}"))
    assert emission_curve(chain, 0.8) == pytest.approx(chain_emission(0.8, 4, 4))
