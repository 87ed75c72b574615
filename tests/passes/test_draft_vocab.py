"""draft-vocab: the drafter proposes from the first ids only, the target still judges every token.

Differential: the narrowed pipeline's greedy tokens equal the AR baseline's (engine) and pass
`specir check` (token forcing against transformers); every drafted token of a step is below the
size; the loader gives the narrowed head exactly the checkpoint tensor's first rows. Sampling
stays lossless (tests/runtime/test_sampling.py runs a narrowed chain through its chi-square test).
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from specir.errors import SpecirError
from specir.ir.opdefs import OPS
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from specir.pipeline_template import pipeline_text
from specir.runtime.baseline import ar_pipeline
from specir.runtime.session import make_engine
from specir.runtime.weights import load_weights
from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.helpers.specs import write_prompts

V, SIZE = 259, 64
PROMPTS = [[5, 6, 7, 5, 6, 7, 9], [1, 2, 3]]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(target, drafter): a random Llama (vocab 259, untied head) and a noisy copy of it."""
    root = tmp_path_factory.mktemp("draft_vocab")
    target = make_checkpoint("llama", root / "target", seed=5, vocab_size=V, initializer_range=0.3,
                             num_hidden_layers=2)
    drafter = make_checkpoint("llama", root / "drafter", seed=7, noise_from=target, noise=0.3)
    for folder in (target, drafter):
        write_tokenizer(folder, V)
    return target, drafter


def narrowed(pair, passes: str):
    target, drafter = pair
    pipeline = load_pipeline("<test>", text=pipeline_text("p", str(target), str(drafter), 3))
    return PassManager(build_passes(passes)).run(pipeline)


@pytest.mark.parametrize("passes", [f"draft-vocab{{size={SIZE}}}", f"tree-verify{{budget=6,topk=2}},draft-vocab{{size={SIZE}}}"],
                         ids=["chain", "tree"])
def test_greedy_output_is_the_targets_and_drafts_stay_in_the_prefix(pair, passes, monkeypatch):
    pipeline = narrowed(pair, passes)
    drafter = pipeline.model("drafter")
    assert drafter.graph.result_type.width == SIZE
    assert pipeline.model("target").graph.result_type.width == V
    drafted = []
    for name in ("draft.chain", "draft.tree"):  # record every draft the step makes
        opdef = OPS[name]

        def spy(ctx, op, args, real=opdef.step.lower):
            out = real(ctx, op, args)
            if hasattr(out, "parents"):  # a tree: node 0 is the pending token, the target's
                drafted.append(out.tokens[:, 1:][out.valid[:, 1:]].clone())
            else:
                drafted.append(out.tokens.clone())
            return out
        monkeypatch.setitem(OPS, name, replace(opdef, step=replace(opdef.step, lower=spy)))
    engine = make_engine(pipeline, "reference", "cpu", None)
    ar = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None)
    got, want = engine.generate(PROMPTS, 16), ar.generate(PROMPTS, 16)
    assert [r.tokens for r in got] == [r.tokens for r in want]
    assert drafted and all(int(t.max()) < SIZE for t in drafted)


def test_check_passes_with_no_mismatch(pair, specir_cli, tmp_path):
    target, drafter = pair
    spec = tmp_path / "p.spec"
    spec.write_text(pipeline_text("p", str(target), str(drafter), 3))
    prompts = write_prompts(tmp_path, 2, V, seed=11)
    code, out, err = specir_cli("check", spec, "-p", f"draft-vocab{{size={SIZE}}}", "--target", "cpu",
                                "--prompts", prompts, "--max-new-tokens", 12, "--limit", 0, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] and report["mismatches"] == 0 and report["tokens_checked"] == report["tokens_asked"] == 24


def test_the_narrowed_head_is_the_first_rows_of_the_checkpoint_tensor(pair):
    pipeline = narrowed(pair, f"draft-vocab{{size={SIZE}}}")
    drafter = pipeline.model("drafter")
    full = load_weights(load_pipeline("<t>", text=pipeline_text("p", str(pair[0]), str(pair[1]), 3)).model("drafter"))
    weights = load_weights(drafter)
    assert "lm_head.weight" not in weights  # nothing else reads the untied head: not loaded in full
    assert torch.equal(weights[f"lm_head.weight[:{SIZE}]"], full["lm_head.weight"][:SIZE])


def test_a_prefix_longer_than_the_tensor_is_a_located_error(pair):
    pipeline = narrowed(pair, f"draft-vocab{{size={SIZE}}}")
    drafter = pipeline.model("drafter")
    name = f"lm_head.weight[:{SIZE}]"
    weights = tuple(replace(w, type=replace(w.type, shape=(V + 1, *w.type.shape[1:]))) if w.name == name else w
                    for w in drafter.weights)
    with pytest.raises(SpecirError, match="does not fit its tensor's shape"):
        load_weights(replace(drafter, weights=weights))


def test_a_size_at_least_the_vocabulary_leaves_the_pipeline_as_it_is(pair):
    before = narrowed(pair, "canonicalize")
    after = narrowed(pair, f"draft-vocab{{size={V}}}")
    assert after.model("drafter") == before.model("drafter")


def test_a_step_without_a_draft_model_is_refused(pair):
    target, _ = pair
    pipeline = load_pipeline("<test>", text=pipeline_text("p", str(target), "ngram", 3))
    with pytest.raises(SpecirError, match="draft-vocab narrows a draft model's head"):
        PassManager(build_passes("draft-vocab")).run(pipeline)


def test_triton_step_backend_runs_the_narrowed_head(pair):
    """The narrowed head through the Triton model executor (a linear of SIZE rows) equals plain decoding."""
    import os
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs the Triton interpreter or a GPU")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    pipeline = narrowed(pair, f"tree-verify{{budget=6,topk=2}},draft-vocab{{size={SIZE}}}")
    got = make_engine(pipeline, "triton", device, None).generate(PROMPTS, 8)
    want = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None).generate(PROMPTS, 8)
    assert [r.tokens for r in got] == [r.tokens for r in want]


def test_a_packed_head_is_narrowed_and_decodes_as_the_target(pair):
    """A head pack-weights made bf12 (written here: random tiny weights do not pack) narrows to a
    bf12 head of the first rows, packed at load time."""
    from specir.ir.printer import print_pipeline
    head, rest = print_pipeline(narrowed(pair, "canonicalize")).split("model @drafter", 1)
    rest = rest.replace('weight "lm_head.weight" : bf16[', 'weight "lm_head.weight" : bf12[', 1)
    rest = rest.replace('linear %norm {weight = "lm_head.weight"}', 'packed_linear %norm {format = "bf12", weight = "lm_head.weight"}', 1)
    packed = load_pipeline("<test>", text=head + "model @drafter" + rest)
    pipeline = PassManager(build_passes(f"draft-vocab{{size={SIZE}}}")).run(packed)
    drafter = pipeline.model("drafter")
    op = next(op for op in drafter.graph.ops if op.result == drafter.graph.result)
    assert op.name == "packed_linear" and op.attrs["weight"] == f"lm_head.weight[:{SIZE}]"
    assert drafter.weight(op.attrs["weight"]).type.dtype == "bf12"
    engine = make_engine(pipeline, "reference", "cpu", None)
    ar = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None)
    assert [r.tokens for r in engine.generate(PROMPTS, 12)] == [r.tokens for r in ar.generate(PROMPTS, 12)]


def test_narrowing_twice_names_the_checkpoint_tensor(pair):
    pipeline = narrowed(pair, f"draft-vocab{{size={2 * SIZE}}},draft-vocab{{size={SIZE}}}")
    drafter = pipeline.model("drafter")
    heads = [w for w in drafter.weights if "rows_of" in w.attrs]
    assert [(w.name, w.attrs["rows_of"]) for w in heads] == [(f"lm_head.weight[:{SIZE}]", "lm_head.weight")]
    assert f"lm_head.weight[:{SIZE}]" in load_weights(drafter)


def test_a_narrowed_model_cannot_judge(pair):
    from specir.ir.printer import print_pipeline
    text = print_pipeline(narrowed(pair, f"draft-vocab{{size={SIZE}}}"))
    text = text.replace("verify.chain @target", "verify.chain @drafter")
    with pytest.raises(SpecirError, match="cannot serve verify.chain"):
        load_pipeline("<test>", text=text)


def test_predictions_never_draft_ids_past_the_head():
    from specir.acceptance_model import RANK_CAP, Profile, Sequence
    prof = Profile([Sequence([1], [3, 70, 5, 90], [0, 0, 1, 0])], "d")
    assert prof.within(None) is prof and prof.within(100) is prof
    assert prof.within(64).sequences[0].ranks == [0, RANK_CAP, 1, RANK_CAP]
    assert prof.within(64).tau(None) == 1.0


@pytest.mark.parametrize("family", ["falcon_h1", "granitemoehybrid"])
def test_a_hybrid_drafter_whose_logits_are_scaled_narrows_with_its_scale(family, tmp_path):
    """Falcon-H1 (lm_head_multiplier, untied) and Granite (logits_scaling, tied): the head and the
    scale after it return the narrowed logits; chain decoding equals the target's."""
    from tests.hybrid.checkpoints import VOCAB, make_hybrid_checkpoint
    target = make_hybrid_checkpoint(family, tmp_path / "t", seed=1, dtype=torch.float32)
    drafter = make_hybrid_checkpoint(family, tmp_path / "d", seed=2, dtype=torch.float32)
    size = VOCAB // 2
    pipeline = load_pipeline("<test>", text=pipeline_text("p", str(target), str(drafter), 3))
    pipeline = PassManager(build_passes(f"draft-vocab{{size={size}}}")).run(pipeline)
    model = pipeline.model("drafter")
    last = next(op for op in model.graph.ops if op.result == model.graph.result)
    assert last.name == "scale" and model.graph.result_type.width == size
    engine = make_engine(pipeline, "reference", "cpu", None)
    ar = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None)
    prompts = [[5, 6, 7, 5], [1, 2, 3]]
    assert [r.tokens for r in engine.generate(prompts, 10)] == [r.tokens for r in ar.generate(prompts, 10)]


# ---------------------------------------------------------------- order=frequency (a ranked head)

CORPUS_TEXT = "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n" * 3 + "zzz qqq\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "traffic.txt"
    path.write_text(CORPUS_TEXT)
    return path


def frequency(corpus, size=SIZE) -> str:
    return f'draft-vocab{{size={size},order=frequency,corpus="{corpus}"}}'


def corpus_ranking(pair, corpus) -> list[int]:
    """The ranking by hand: count the corpus's tokens with the drafter's tokenizer, most first, ties by id."""
    from collections import Counter

    from specir.runtime.tokenizer import load_tokenizer
    counts = Counter(load_tokenizer(str(pair[1]))(CORPUS_TEXT, add_special_tokens=False)["input_ids"])
    return sorted(range(V), key=lambda t: (-counts.get(t, 0), t))


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_frequency_order_decodes_as_the_target_and_drafts_only_ranked_ids(pair, corpus, tree, monkeypatch):
    passes = ("tree-verify{budget=6,topk=2}," if tree else "") + frequency(corpus)
    pipeline = narrowed(pair, passes)
    drafter = pipeline.model("drafter")
    assert drafter.graph.result_type.width == V  # the kept logits back at their ids
    scatter = next(op for op in drafter.graph.ops if op.result == drafter.graph.result)
    assert scatter.name == "vocab_scatter" and scatter.attrs["vocab"] == V
    kept = set(corpus_ranking(pair, corpus)[:SIZE])
    drafted = []
    for name in ("draft.chain", "draft.tree"):
        opdef = OPS[name]

        def spy(ctx, op, args, real=opdef.step.lower):
            out = real(ctx, op, args)
            drafted.append(out.tokens[:, 1:][out.valid[:, 1:]].clone() if hasattr(out, "parents") else out.tokens.clone())
            return out
        monkeypatch.setitem(OPS, name, replace(opdef, step=replace(opdef.step, lower=spy)))
    engine = make_engine(pipeline, "reference", "cpu", None)
    ar = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None)
    assert [r.tokens for r in engine.generate(PROMPTS, 16)] == [r.tokens for r in ar.generate(PROMPTS, 16)]
    tokens = torch.cat([t.flatten() for t in drafted])
    assert tokens.numel() and set(tokens.tolist()) <= kept


def test_frequency_head_is_the_checkpoint_rows_at_the_ranked_ids(pair, corpus):
    drafter = narrowed(pair, frequency(corpus)).model("drafter")
    full = load_weights(load_pipeline("<t>", text=pipeline_text("p", str(pair[0]), str(pair[1]), 3)).model("drafter"))
    weights = load_weights(drafter)
    ids = corpus_ranking(pair, corpus)[:SIZE]
    assert weights[f"lm_head.weight[freq:{SIZE}].ids"].tolist() == ids
    assert torch.equal(weights[f"lm_head.weight[freq:{SIZE}]"], full["lm_head.weight"][ids])
    assert "lm_head.weight" not in weights


def test_frequency_check_passes_with_no_mismatch(pair, corpus, specir_cli, tmp_path):
    target, drafter = pair
    spec = tmp_path / "p.spec"
    spec.write_text(pipeline_text("p", str(target), str(drafter), 3))
    prompts = write_prompts(tmp_path, 2, V, seed=11)
    code, out, err = specir_cli("check", spec, "-p", "tree-verify{budget=6,topk=2}," + frequency(corpus),
                                "--target", "cpu", "--prompts", prompts, "--max-new-tokens", 12, "--limit", 0, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] and report["mismatches"] == 0 and report["tokens_checked"] == 24


def test_frequency_triton_step_backend_decodes_as_the_target(pair, corpus):
    import os
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs the Triton interpreter or a GPU")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    pipeline = narrowed(pair, "tree-verify{budget=6,topk=2}," + frequency(corpus))
    got = make_engine(pipeline, "triton", device, None).generate(PROMPTS, 8)
    want = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None).generate(PROMPTS, 8)
    assert [r.tokens for r in got] == [r.tokens for r in want]


def test_frequency_narrowed_twice_or_judging_is_refused(pair, corpus):
    from specir.ir.printer import print_pipeline
    with pytest.raises(SpecirError, match="already proposes from its most frequent ids"):
        narrowed(pair, frequency(corpus) + "," + frequency(corpus, SIZE // 2))
    text = print_pipeline(narrowed(pair, frequency(corpus))).replace("verify.chain @target", "verify.chain @drafter")
    with pytest.raises(SpecirError, match="cannot serve verify.chain"):
        load_pipeline("<test>", text=text)


def test_frequency_predictions_draft_only_the_ranked_ids(pair, corpus):
    from specir.acceptance_model import RANK_CAP, Profile, Sequence
    from specir.prediction import proposed_ids
    pipeline = narrowed(pair, frequency(corpus))
    kept = proposed_ids(pipeline.model("drafter"))
    assert kept == frozenset(corpus_ranking(pair, corpus)[:SIZE])
    assert proposed_ids(pipeline.model("target")) == V
    inside, outside = sorted(kept)[0], next(t for t in range(V) if t not in kept)
    prof = Profile([Sequence([1], [inside, outside], [0, 0])], "d")
    assert prof.within(kept).sequences[0].ranks == [0, RANK_CAP]


def test_a_missing_ranking_corpus_is_one_error(pair, tmp_path):
    drafter = narrowed(pair, frequency(tmp_path / "nowhere.txt")).model("drafter")
    with pytest.raises(SpecirError, match="ranking corpus .* does not exist"):
        load_weights(drafter)


def test_compile_pins_the_ranked_ids_and_reads_a_relative_corpus_from_the_spec_folder(pair, specir_cli, tmp_path,
                                                                                      monkeypatch):
    """The build keeps the ids it was compiled with: editing the corpus afterwards changes nothing;
    a relative corpus is relative to the .spec's folder, whatever the working directory."""
    target, drafter = pair
    project = tmp_path / "project"
    project.mkdir()
    (project / "traffic.txt").write_text(CORPUS_TEXT)
    spec = project / "p.spec"
    spec.write_text(pipeline_text("p", str(target), str(drafter), 3))
    monkeypatch.chdir(tmp_path)  # not the spec's folder
    code, _, err = specir_cli("compile", spec, "--target", "cpu", "-p", 'draft-vocab{size=64,order=frequency,'
                              'corpus="traffic.txt"}', "-o", tmp_path / "build")
    assert code == 0, err
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    assert manifest["derived_weights"]["drafter"]["file"] == "weights/drafter.derived.safetensors"
    (project / "traffic.txt").write_text("zzz qqq zzz qqq\n" * 50)  # a different ranking from now on
    built = load_pipeline(str(tmp_path / "build" / "pipeline.spec"))
    weights = load_weights(built.model("drafter"), build=tmp_path / "build")
    ids = corpus_ranking(pair, None)[:SIZE]
    assert weights[f"lm_head.weight[freq:{SIZE}].ids"].tolist() == ids


def test_a_drafter_without_a_tokenizer_fails_the_compile_with_a_hint(pair, specir_cli, tmp_path):
    import shutil
    target, drafter = pair
    bare = tmp_path / "bare"
    shutil.copytree(drafter, bare)
    (bare / "tokenizer.json").unlink()
    spec = tmp_path / "p.spec"
    spec.write_text(pipeline_text("p", str(target), str(bare), 3))
    code, _, err = specir_cli("compile", spec, "--target", "cpu", "-p", "draft-vocab{size=64,order=frequency}",
                              "-o", tmp_path / "build")
    assert code != 0 and "has none" in err and "draft-vocab{order=id}" in err and "Traceback" not in err, err


def test_a_tree_ranking_more_children_than_the_kept_ids_is_refused(pair, corpus):
    with pytest.raises(SpecirError, match="topk = 8 children a node, more than the 4 ids"):
        narrowed(pair, "tree-verify{budget=6,topk=8}," + frequency(corpus, 4))


def test_emit_ptx_compiles_the_scatter_of_a_frequency_drafter(pair, specir_cli, tmp_path):
    import os

    import triton
    if not os.path.exists(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")):
        pytest.skip("Triton's bundled ptxas is missing")
    target, drafter = pair
    spec = tmp_path / "p.spec"
    spec.write_text(pipeline_text("p", str(target), str(drafter), 3))
    code, _, err = specir_cli("compile", spec, "--target", "h100", "-p", "draft-vocab{size=64,order=frequency}",
                              "-o", tmp_path / "build", "--emit-ptx")
    assert code == 0, err
    manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())
    assert not [n for n in manifest["notes"] if "offline compile failed" in n], manifest["notes"]
    assert any(k["kernel"].endswith("vocab_scatter") and k.get("ptx") for k in manifest["kernels"]), manifest["kernels"]
