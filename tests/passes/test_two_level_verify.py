"""two-level-verify: every mid-level kind (layers, window, model), over chain and tree drafts, emits
exactly the target's greedy tokens (engine vs the AR baseline, and `specir check` token forcing
against transformers); a mid level equal to the target accepts its whole proposal; the op's
interfaces size the step; the Triton step backend lowers it under the interpreter."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from specir.cli.cmd_init import pipeline_text
from specir.ir.printer import print_pipeline
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from specir.runtime.baseline import ar_pipeline
from specir.runtime.session import make_engine
from specir.step.interfaces import StepInfo
from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.helpers.specs import write_prompts
from tests.runtime.test_sampling import chi2_pvalues, exact_marginals, sample_tokens, small_pair  # noqa: F401

PROMPTS = [[5, 6, 7, 5, 6, 7, 9], [1, 2, 3]]
KIND_PASSES = {"layers": "two-level-verify{layers=2}", "window": "two-level-verify{kind=window,window=4}",
               "model": "two-level-verify{kind=model,extend=3}"}


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    """(target, mid, drafter): a 4-layer random Llama, a close noisy copy, a far noisy copy (vocab 259)."""
    root = tmp_path_factory.mktemp("trio")
    target = make_checkpoint("llama", root / "target", seed=5, vocab_size=259, initializer_range=0.3,
                             num_hidden_layers=4)
    mid = make_checkpoint("llama", root / "mid", seed=6, noise_from=target, noise=0.02)
    drafter = make_checkpoint("llama", root / "drafter", seed=7, noise_from=target, noise=0.3)
    for folder in (target, mid, drafter):
        write_tokenizer(folder, 259)
    return target, mid, drafter


def spec_text(trio, dtype: str | None = "f32", k: int = 3, with_mid: bool = True) -> str:
    """The init pipeline of the trio's target and drafter, plus `model @mid` when `with_mid`."""
    target, mid, drafter = trio
    text = pipeline_text("p", str(target), str(drafter), k)
    if dtype:
        text = text.replace(")\n", f') attributes {{dtype = "{dtype}"}}\n', 2)
    extra = f'  model @mid = import("{mid}")' + (f' attributes {{dtype = "{dtype}"}}' if dtype else "") + "\n"
    if not with_mid:
        return text
    head, rest = text.split("  step", 1)
    return head + extra + "  step" + rest


def two_level(trio, kind: str, tree: bool = False, passes: str | None = None, dtype: str | None = "f32"):
    pipeline = load_pipeline("<test>", text=spec_text(trio, dtype, with_mid=kind == "model"))
    chain = ("tree-verify{budget=6,topk=2,depth=3}," if tree else "") + (passes or KIND_PASSES[kind])
    return PassManager(build_passes(chain)).run(pipeline)


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
@pytest.mark.parametrize("kind", sorted(KIND_PASSES))
def test_output_is_the_targets(trio, kind, tree):
    pipeline = two_level(trio, kind, tree)
    ops = [op.name for op in pipeline.step.ops]
    assert ops[:3] == ["draft.tree" if tree else "draft.chain", "draft.cascade", "verify.chain"]
    engine = make_engine(pipeline, "reference", "cpu", None)
    ar = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None)
    got = engine.generate(PROMPTS, 16)
    want = ar.generate(PROMPTS, 16)
    assert [r.tokens for r in got] == [r.tokens for r in want]
    assert all(len(r.tokens) == 16 for r in got)


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_a_mid_level_equal_to_the_target_accepts_its_whole_proposal(trio, tree):
    """kind=window with a window past the context: @mid computes the target's logits, so the target
    accepts the mid's prefix and all `extend` tokens of its extension every step."""
    pipeline = two_level(trio, "window", tree, "two-level-verify{kind=window,window=4096,extend=3}")
    engine = make_engine(pipeline, "reference", "cpu", None)
    for r in engine.generate(PROMPTS, 24):
        assert min(r.accept_lengths[:-1]) >= 4, r.accept_lengths  # extend + the bonus, at least


def test_sampling_runs_and_greedy_requests_stay_exact(trio):
    pipeline = two_level(trio, "layers")
    engine = make_engine(pipeline, "reference", "cpu", None)
    sampled = engine.generate(PROMPTS, 12, temperature=0.8, seed=3)
    assert all(len(r.tokens) == 12 for r in sampled)


def test_interfaces_size_the_step(trio):
    pipeline = two_level(trio, "model")  # k = 3, extend = 3
    info = StepInfo(pipeline)
    cascade = next(op for op in pipeline.step.ops if op.name == "draft.cascade")
    assert info.width(cascade) == info.depth(cascade) == 6
    assert info.emit_width == 7  # the target verifies the pending token + 6
    mid = [(f.purpose, f.tokens, f.count) for f in info.forwards() if f.model == "mid"]
    assert mid == [("mid-verify", 7 + 3, 1), ("draft", 1, 2)]  # catch-up and judging in one forward
    assert info.scratch_rows()["mid"] == 7 + 3 + 3


def test_layers_kind_derives_the_mid_region_from_the_target(trio):
    pipeline = two_level(trio, "layers", passes="two-level-verify{layers=1}", dtype=None)
    mid, target = pipeline.model("mid"), pipeline.model("target")
    assert mid.attrs["source"] == target.attrs["source"] and mid.attrs["layers"] == 1
    assert sum(op.name == "attention" for op in mid.graph.ops) == 1
    names = {w.name for w in mid.weights}
    assert "model.norm.weight" in names and "lm_head.weight" in names
    assert not any(n.startswith("model.layers.1.") for n in names)
    text = print_pipeline(pipeline)
    assert print_pipeline(load_pipeline("<t>", text=text)) == text


def test_specir_opt_on_any_llama_family_pair(family_checkpoints, specir_cli, tmp_path):
    for family, folder in family_checkpoints.items():
        spec = tmp_path / f"{family}.spec"
        spec.write_text(pipeline_text(family, str(folder), str(folder), 2))
        code, out, err = specir_cli("opt", spec, "-p", "two-level-verify")
        assert code == 0, (family, err)
        assert "draft.cascade @mid" in out and "model @mid" in out


@pytest.mark.parametrize("kind", sorted(KIND_PASSES))
def test_check_passes_with_no_mismatch(trio, kind, specir_cli, tmp_path):
    spec = tmp_path / "p.spec"
    spec.write_text(spec_text(trio, dtype=None, with_mid=kind == "model"))
    prompts = write_prompts(tmp_path, 2, 259, seed=11)
    code, out, err = specir_cli("check", spec, "-p", KIND_PASSES[kind], "--target", "cpu", "--prompts", prompts,
                                "--max-new-tokens", 12, "--limit", 0, "--json")
    report = json.loads(out)
    assert code == 0, err
    assert report["ok"] and report["mismatches"] == 0 and report["tokens_checked"] == report["tokens_asked"] == 24


@pytest.mark.parametrize("kind,passes", [("layers", "two-level-verify{layers=1}"),
                                         ("window", "two-level-verify{kind=window,window=6}")])
def test_triton_step_backend_lowers_the_cascade(trio, kind, passes):
    """Each mid level on the Triton backend (the window kind through the attention kernel's sliding
    window: prompts and generations longer than the 6-row window) equals plain decoding."""
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs the Triton interpreter or a GPU")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    pipeline = two_level(trio, kind, passes=passes)
    got = make_engine(pipeline, "triton", device, None).generate(PROMPTS, 8)
    want = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None).generate(PROMPTS, 8)
    assert [r.tokens for r in got] == [r.tokens for r in want]


@pytest.mark.parametrize("passes", ["two-level-verify{layers=3,extend=3}", "two-level-verify{kind=window,window=4096}"])
def test_cost_model_predicts_the_measured_tau(trio, passes):
    """The acceptance model (drafter -> mid -> target along the target's path) predicts the engine's
    mean accepted length; the step time prices @mid's forwards from the op's interfaces."""
    from specir import acceptance_model
    from specir.calibration import Calibration
    from specir.prediction import predict
    from specir.targets import get_target
    pipeline = two_level(trio, "layers", passes=passes)
    prompts = PROMPTS + [[9, 8, 7, 6], [100, 101, 102, 5, 6]]
    conts = [r.tokens for r in make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None)
             .generate(prompts, 24)]
    got = make_engine(pipeline, "reference", "cpu", None).generate(prompts, 24)
    measured = sum(len(r.tokens) for r in got) / sum(len(r.accept_lengths) for r in got)
    profile = acceptance_model.Profile.from_dict(
        acceptance_model.profile(pipeline.model("drafter"), prompts, conts).as_dict())
    target = get_target("cpu")
    pred = predict(pipeline, target, Calibration.from_target(target), profile)
    assert abs(pred.tau - measured) <= 0.1 * measured, (pred.tau, measured)
    assert len(profile.mids) == 1  # the mid region's ranks, measured once and kept in the profile
    mid_parts = [p for p in pred.step.parts if p.get("model") == "@mid"]
    assert {p["purpose"] for p in mid_parts} == {"mid-verify", "draft"} and pred.max_tau == 1 + 3 + (
        3 if "extend=3" in passes else 2)


@pytest.mark.parametrize("passes", ["two-level-verify{layers=1}",
                                    "tree-verify{budget=6,topk=3},two-level-verify{layers=1,extend=3}"])
def test_two_level_sampling_matches_target_sampling(passes, small_pair):
    """At temperature > 0 the cascade's chain is a deterministic candidate list: accept.sample's
    rejection sampling keeps the target's law (chi-square per position, as tests/runtime/test_sampling.py)."""
    from tests.helpers.specs import write_spec
    root, target, drafter = small_pair
    spec = write_spec(root, "two_level", target, drafter, k=3, passes=passes, dtype="f32")
    pvalues = chi2_pvalues(sample_tokens(spec), exact_marginals(target))
    assert min(pvalues) > 1e-4, pvalues


def test_ngram_drafts_judged_by_the_targets_first_layers(trio):
    pipeline = load_pipeline("<test>", text=pipeline_text("p", str(trio[0]), "ngram", 4).replace(
        ")\n", ') attributes {dtype = "f32"}\n', 1))
    pipeline = PassManager(build_passes("two-level-verify{layers=1}")).run(pipeline)
    assert [op.name for op in pipeline.step.ops][:2] == ["draft.ngram", "draft.cascade"]
    got = make_engine(pipeline, "reference", "cpu", None).generate(PROMPTS, 16)
    want = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None).generate(PROMPTS, 16)
    assert [r.tokens for r in got] == [r.tokens for r in want]


def test_a_drafter_that_also_judges_its_own_draft_is_refused(trio):
    from specir.errors import SpecirError
    pipeline = two_level(trio, "model", passes="two-level-verify{kind=model,model=drafter}")
    with pytest.raises(SpecirError, match="drafts in two step ops"):
        make_engine(pipeline, "reference", "cpu", None)
    lookup = two_level(trio, "model", passes="two-level-verify{kind=model,model=drafter},ngram-draft")
    assert [op.name for op in lookup.step.ops][:2] == ["draft.ngram", "draft.cascade"]
    got = make_engine(lookup, "reference", "cpu", None).generate(PROMPTS, 12)
    want = make_engine(ar_pipeline(lookup, stock=False), "reference", "cpu", None).generate(PROMPTS, 12)
    assert [r.tokens for r in got] == [r.tokens for r in want]


def test_init_mid_imports_the_mid_model_for_kind_model(trio, specir_cli, tmp_path):
    """`specir init --mid DIR` adds `model @mid = import(DIR)`; two-level-verify{kind=model} then
    verifies with it; a mid model of another tokenizer is refused."""
    target, mid, drafter = trio
    code, out, err = specir_cli("init", "--target-model", target, "--drafter", drafter, "--mid", mid)
    assert code == 0, err
    pipeline = load_pipeline("<init>", text=out)
    assert pipeline.model("mid").attrs["source"] == str(mid.resolve())
    spec = tmp_path / "p.spec"
    spec.write_text(out)
    code, out, err = specir_cli("opt", spec, "-p", "two-level-verify{kind=model,model=mid}")
    assert code == 0, err
    assert "draft.cascade @mid" in out
    other = make_checkpoint("llama", tmp_path / "other", seed=8, vocab_size=259, num_hidden_layers=1)
    write_tokenizer(other, 258)
    code, out, err = specir_cli("init", "--target-model", target, "--drafter", drafter, "--mid", other)
    assert code != 0 and "tokenizer differs" in err
    code, out, err = specir_cli("init", "--target-model", target, "--drafter", drafter, "--mid", " ")
    assert code != 0 and "--mid is empty" in err
