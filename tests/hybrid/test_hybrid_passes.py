"""The other issues' passes on hybrid targets (docs/HYBRID.md, "CLI, per family"): two-level-verify of every
kind (a mid level of the target's first layers or of its windowed attention keeps its own recurrent
state; an attention-only mid model under n-gram drafting), over chain and tree drafts, and
draft-vocab{order=frequency} on the drafter decode as the hybrid target does (greedy, against its AR
engine), on the reference backend (the Triton interpreter's runs: test_hybrid_two_level_triton.py and
test_hybrid_mid_level_triton.py); `specir check` finds no mismatch; kind=layers cuts every family's graph at a
decoder layer (batch-fusion: tests/hybrid/test_hybrid_batch_fusion.py)."""
from __future__ import annotations

import json

import pytest

from specir.errors import SpecirError
from specir.pass_infra import PassManager, build_passes
from specir.pipeline_template import pipeline_text
from specir.runtime.baseline import ar_pipeline
from specir.runtime.session import make_engine
from tests.helpers.checkpoints import make_checkpoint
from tests.helpers.specs import write_prompts
from specir.passes.two_level_verify import decoder_layer
from specir.ir.ops_recurrent import mixes_tokens, model_state_specs, state_specs
from tests.hybrid.checkpoints import HYBRID_FAMILIES, make_hybrid_checkpoint
from tests.hybrid.checkpoints import VOCAB as VOCAB_SMALL
from tests.hybrid.helpers import PASS_FAMILIES as FAMILIES, PASS_PROMPTS as PROMPTS, PASS_VOCAB as VOCAB
from tests.hybrid.helpers import mid_level_accepts_whole_proposals, pass_pipeline


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("passes", ["two-level-verify{kind=model,model=drafter,extend=2},ngram-draft{k=4}",
                                    "two-level-verify{kind=layers,layers=1,extend=3}",
                                    "tree-verify{budget=6,topk=2,depth=3},two-level-verify{kind=layers,layers=2}",
                                    "two-level-verify{kind=window,window=3}",
                                    "tree-verify{budget=6,topk=2,depth=3},two-level-verify{kind=window,window=3,extend=3}",
                                    "tree-verify{budget=6,topk=2},draft-vocab{size=64,order=frequency,corpus=CORPUS}"],
                         ids=["two-level-model", "layers-chain", "layers-tree", "window-chain", "window-tree",
                              "draft-vocab-frequency"])
def test_passes_decode_as_the_hybrid_target(family, passes, pass_checkpoints):
    targets, drafter, corpus = pass_checkpoints
    pipeline = PassManager(build_passes(passes.replace("CORPUS", f'"{corpus}"'))).run(pass_pipeline(targets[family], drafter))
    got = make_engine(pipeline, "reference", "cpu", None).generate(PROMPTS, 10)
    want = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None).generate(PROMPTS, 10)
    assert [r.tokens for r in got] == [r.tokens for r in want]


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_layers_kind_cuts_every_family_at_a_decoder_layer(family, tmp_path):
    """The mid level keeps the weights of layers < `layers` only (recurrent, attention and MLP-only
    layers alike), its own recurrent states for the layers it keeps, and decodes as the target."""
    target = make_hybrid_checkpoint(family, tmp_path / family, seed=3)
    drafter = make_checkpoint("llama", tmp_path / "d", seed=4, vocab_size=VOCAB_SMALL, num_hidden_layers=1)
    pipeline = PassManager(build_passes("tree-verify{budget=6,topk=2,depth=3},two-level-verify{kind=layers,layers=1}")) \
        .run(pass_pipeline(target, drafter))
    mid, full = pipeline.model("mid"), pipeline.model("target")
    names = {w.name for w in mid.weights}
    assert names < {w.name for w in full.weights}
    assert {decoder_layer(op) for op in mid.graph.ops} - {None} == {0}
    assert model_state_specs(mid) == [s for s in model_state_specs(full) if s in model_state_specs(mid)]
    assert len(model_state_specs(mid)) == sum(1 for op in full.graph.ops if decoder_layer(op) == 0
                                             for _ in state_specs(op))
    got = make_engine(pipeline, "reference", "cpu", None).generate([[5, 6, 7, 5, 6], [1, 2]], 8)
    want = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None).generate([[5, 6, 7, 5, 6], [1, 2]], 8)
    assert [r.tokens for r in got] == [r.tokens for r in want]


def test_layers_kind_needs_a_layer_to_cut_at(pass_checkpoints):
    targets, drafter, _ = pass_checkpoints
    with pytest.raises(SpecirError, match="has 4 layers") as err:
        PassManager(build_passes("two-level-verify{kind=layers,layers=4}")).run(pass_pipeline(targets["qwen3_5"], drafter))
    assert err.value.hint


@pytest.mark.parametrize("family", FAMILIES)
def test_check_token_forces_a_two_level_hybrid(family, pass_checkpoints, specir_cli, tmp_path):
    targets, drafter, _ = pass_checkpoints
    spec = tmp_path / "p.spec"
    spec.write_text(pipeline_text("p", str(targets[family]), str(drafter), 3))
    prompts = write_prompts(tmp_path, 4, VOCAB, seed=5)
    code, out, err = specir_cli("check", spec, "-p", "tree-verify{budget=6,topk=2,depth=3},two-level-verify{kind=layers}",
                                "--target", "cpu", "--prompts", prompts, "--batch-size", 4, "--max-new-tokens", 8,
                                "--limit", 0, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] and report["mismatches"] == 0 and report["tokens_checked"] == report["tokens_asked"] == 32


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_a_mid_level_equal_to_the_hybrid_target_accepts_its_whole_proposal(tree, pass_checkpoints):
    """tests.hybrid.helpers.mid_level_accepts_whole_proposals on the reference backend (the Triton runs:
    tests/hybrid/test_hybrid_mid_level_triton.py)."""
    mid_level_accepts_whole_proposals(tree, "reference", pass_checkpoints)


@pytest.mark.parametrize("family", ["qwen3_5", "bamba", "falcon_h1", "nemotron_h"])
def test_a_graph_whose_weights_name_no_layer_is_cut_between_token_mixers(family, tmp_path):
    """Weight names that number no layer (a hand-written graph): one layer per residual stream value a
    token mixer follows, so a recurrent layer's conv and scan, or Falcon-H1's parallel mixers, are one layer:
    the mid level keeps the same mixers as the cut by names where every layer has a mixer."""
    from dataclasses import replace

    from specir.passes.two_level_verify import layer_cuts, layer_prefix
    target = make_hybrid_checkpoint(family, tmp_path / family, seed=3)
    drafter = make_checkpoint("llama", tmp_path / "d", seed=4, vocab_size=VOCAB_SMALL, num_hidden_layers=1)
    model = pass_pipeline(target, drafter).model("target")
    names = {w.name for w in model.weights}
    rename = lambda v: v.replace("layers.", "L") if isinstance(v, str) and v in names else v  # noqa: E731
    ops = tuple(replace(op, attrs=type(op.attrs)({k: rename(v) for k, v in op.attrs.items()})) for op in model.graph.ops)
    anonymous = replace(model, weights=tuple(replace(w, name=rename(w.name)) for w in model.weights),
                        graph=replace(model.graph, ops=ops))
    assert all(decoder_layer(op) is None for op in anonymous.graph.ops)
    mixer_at = [i for i, op in enumerate(model.graph.ops) if mixes_tokens(op)]
    named = layer_cuts(model)  # the cuts between the layers the weights name
    bounds = named + [len(model.graph.ops)]
    with_mixer = [named[n] for n in range(len(named)) if any(bounds[n] < i < bounds[n + 1] for i in mixer_at)]
    assert layer_cuts(anonymous) == with_mixer  # Nemotron-H's MLP-only layers join the layer before them
    for keep in range(1, len(with_mixer)):
        mid = layer_prefix(anonymous, keep)
        assert sum(1 for i in mixer_at if i < with_mixer[keep]) == \
            sum(1 for op in mid.graph.ops if mixes_tokens(op))
