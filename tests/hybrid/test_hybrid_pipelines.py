"""Speculative pipelines with hybrid targets end to end (reference kernels, fp32): chain (k = 4)
and tree (tree-verify, budget 12, top-k 3) verification give exactly the tokens of plain greedy
decoding, with a drafter that is a noisy copy of the target (itself hybrid: its drafts continue
from scratch node states) or a Llama drafter; those tokens pass token forcing against
transformers' forward (argmax of transformers on the prompt plus the tokens before; fp32 ties
within 1e-4 of the logit range allowed); `specir check` (token forcing in bf16, CPU backend)
passes with zero mismatches at batch 1 and 4.

The oracle is transformers' forward, not its generate: Nemotron-H's decode path skips the dt
clamp (time_step_min) that its forward applies, so where the clamp binds its generate disagrees
with its own forward; token forcing, like `specir check`, judges by the forward."""
from __future__ import annotations

import json

import pytest
from specir.load import load_pipeline
from specir.runtime.session import make_engine
from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.helpers.specs import write_prompts, write_spec
from tests.hybrid.checkpoints import HYBRID_FAMILIES, make_hybrid_checkpoint
from tests.hybrid.helpers import forced_greedy as _greedy

KINDS = {"chain": dict(k=4), "tree": dict(k=4, passes="tree-verify{budget=12,topk=3}")}
PROMPTS = [[1, 2, 3, 4], [9, 8, 7], [5, 6, 7, 8, 9, 10, 11, 3, 2]]


@pytest.fixture(scope="module")
def noisy_pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid-pairs")
    pairs = {}
    for i, family in enumerate(HYBRID_FAMILIES):
        target = make_hybrid_checkpoint(family, root / family / "t", seed=20 + i)
        pairs[family] = (target, make_checkpoint(family, root / family / "d", noise_from=target, noise=0.02))
    return pairs


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_chain_and_tree_equal_greedy(family, noisy_pairs, tmp_path):
    target, drafter = noisy_pairs[family]
    expected = _greedy(target, PROMPTS, 16)
    for kind, kw in KINDS.items():
        spec = write_spec(tmp_path, kind, target, drafter, dtype="f32", **kw)
        results = make_engine(load_pipeline(spec), "reference", "cpu", None).generate(PROMPTS, 16)
        assert [r.tokens for r in results] == expected, (family, kind)
        assert sum(r.tau for r in results) / len(results) > 1.5, (family, kind, [r.tau for r in results])


@pytest.mark.parametrize("family", ["qwen3_next", "falcon_h1"])
def test_llama_drafter_for_a_hybrid_target(family, noisy_pairs, llama_drafter, tmp_path):
    target, _ = noisy_pairs[family]
    expected = _greedy(target, PROMPTS, 12)
    for kind, kw in KINDS.items():
        spec = write_spec(tmp_path, kind, target, llama_drafter, dtype="f32", **kw)
        assert [r.tokens for r in make_engine(load_pipeline(spec), "reference", "cpu", None).generate(PROMPTS, 12)] == expected, kind


@pytest.mark.parametrize("family,kind,batch", [("qwen3_5", "tree", 4), ("nemotron_h", "chain", 1)])
def test_check_passes(family, kind, batch, tmp_path, specir_cli):
    target = make_hybrid_checkpoint(family, tmp_path / "t", seed=3, vocab_size=259)
    drafter = make_checkpoint(family, tmp_path / "d", noise_from=target, noise=0.02)
    for folder in (target, drafter):
        write_tokenizer(folder, 259)
    spec = write_spec(tmp_path, kind, target, drafter, **KINDS[kind])
    prompts = write_prompts(tmp_path, 6, 259, seed=batch)
    code, out, err = specir_cli("check", spec, "--prompts", prompts, "--batch-size", batch, "--max-new-tokens", 10,
                                "--json", "--limit", 0)
    report = json.loads(out)
    assert code == 0, (report["mismatches"], err)
    assert report["tokens_checked"] == 6 * 10 and report["mismatches"] == 0


@pytest.mark.parametrize("family", ["qwen3_5", "bamba"])
def test_continuous_batching_reuses_slots(family, noisy_pairs, tmp_path):
    """A request that joins in a slot another request left starts from a fresh recurrent state
    (its short prompt leaves the state it starts from visible in its tokens)."""
    target, drafter = noisy_pairs[family]
    prompts = [[1, 2, 3, 4, 5, 6, 7, 8], [9, 8, 7], [5, 6]]
    expected = _greedy(target, prompts, 10)
    spec = write_spec(tmp_path, "tree", target, drafter, dtype="f32", **KINDS["tree"])
    session = make_engine(load_pipeline(spec), "reference", "cpu", None).open(2, 64, sampling=False)
    first = session.add(prompts[0], 3)  # leaves early, its slot goes to the third request
    second = session.add(prompts[1], 10)
    third = None
    while not (second.done and third is not None and third.done):
        session.step()
        if first.done and third is None:
            third = session.add(prompts[2], 10)
    assert first.generated == expected[0][:3]
    assert second.generated == expected[1]
    assert third.generated == expected[2] and third.slot == first.slot


@pytest.mark.parametrize("family", ["qwen3_5", "bamba"])
def test_long_prompts_prefill_in_chunks(family, noisy_pairs, tmp_path):
    """Prompts longer than a recurrent prefill chunk (engine.RECURRENT_PREFILL_CHUNK) next to a short
    one: the state is committed chunk by chunk, and the ring holds a step's nodes, not a prompt's."""
    from specir.step.engine import RECURRENT_PREFILL_CHUNK
    target, drafter = noisy_pairs[family]
    prompts = [[(7 * i + 3) % 96 for i in range(2 * RECURRENT_PREFILL_CHUNK + 17)], [5, 6]]
    expected = _greedy(target, prompts, 8)
    spec = write_spec(tmp_path, "tree", target, drafter, dtype="f32", **KINDS["tree"])
    engine = make_engine(load_pipeline(spec), "reference", "cpu", None)
    assert [r.tokens for r in engine.generate(prompts, 8)] == expected
    nodes = engine.executors["target"].state_nodes
    assert nodes < len(prompts[0]), nodes


@pytest.mark.parametrize("family", ["qwen3_5", "bamba"])
def test_ring_sized_by_memory_prefills_in_ring_sized_chunks(family, noisy_pairs, tmp_path, monkeypatch):
    """A state ring held to the step's own nodes by its byte budget (as at a 9B shape, where a
    node's state is 51 MB): the prefill runs in chunks no longer than the ring, ragged prompts
    still commit the state after their last token, and the tokens equal greedy decoding."""
    from specir.runtime import recurrent_state
    monkeypatch.setattr(recurrent_state, "RING_BYTES_PER_SLOT", 1)
    target, drafter = noisy_pairs[family]
    prompts = [[(5 * i + 1) % 96 for i in range(23)], [5, 6], [(3 * i + 2) % 96 for i in range(11)]]
    expected = _greedy(target, prompts, 6)
    spec = write_spec(tmp_path, "chain", target, drafter, dtype="f32", k=2)
    engine = make_engine(load_pipeline(spec), "reference", "cpu", None)
    assert [r.tokens for r in engine.generate(prompts, 6)] == expected
    step_nodes = engine.info.scratch_rows()["target"] + engine.info.emit_width + 1
    assert engine.executors["target"].state_nodes == step_nodes < len(prompts[0])  # the step's, no more


def test_ring_nodes_budget():
    """ring_nodes: a step's nodes always; beyond them up to 64 (the longest prefill chunk) within
    the per-slot byte budget."""
    from specir.ir.ops_recurrent import StateSpec
    from specir.runtime.recurrent_state import node_bytes, ring_nodes
    small = [StateSpec(0, "ssm", (2, 16, 8), "f32")]
    assert node_bytes(small, 2) == 2 * 16 * 8 * 4
    assert ring_nodes(small, 6) == 64
    q35_9b = [StateSpec(i, "delta", (32, 128, 128), "f32") for i in range(24)]  # 50 MB a node
    assert ring_nodes(q35_9b, 6) == (1 << 30) // node_bytes(q35_9b, 2) == 21
    assert ring_nodes(q35_9b, 71) == 71  # a 64-node tree's step needs more than the budget: it gets them
