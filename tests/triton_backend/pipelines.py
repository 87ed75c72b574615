"""Pipelines of the tiny pair for the Triton backend tests, and a token-forcing check."""
from __future__ import annotations

from specir.pipeline_template import pipeline_text
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from specir.passes.fusion import FUSION_DEFAULTS, LATE_DEFAULTS
from specir.runtime.baseline import ar_pipeline

KINDS = {
    "ar": dict(k=2),
    "chain": dict(k=2),
    "tree": dict(k=2, passes="tree-verify{budget=4,topk=2,depth=2}"),
    "ngram": dict(k=3),
}
PROMPTS = [[5, 6, 7, 5, 6, 7], [1, 2, 3]]


# the fusions as they were by default before session 25 turned the last four on (passes/fusion.LATE_DEFAULTS): each
# fusion's tests start here, with those four off, and state every flag; the other defaults still reach them
BASE_FUSIONS = {**FUSION_DEFAULTS, **{f: False for f in LATE_DEFAULTS}}


def fusion_pass(models: str = "target", **flags: bool) -> str:
    """The fusion pass stating every flag (the pass sets those it is not given to their defaults):
    BASE_FUSIONS with `flags`."""
    stated = {**BASE_FUSIONS, **flags}
    return "fusion{" + ",".join(f"{k}={str(v).lower()}" for k, v in stated.items()) + f",models={models}}}"

def pipeline(kind: str, target, drafter, dtype: str = "f32"):
    """`kind` of KINDS over the tiny pair, activations in `dtype` (f32 keeps the interpreter fast)."""
    opts = KINDS[kind]
    text = pipeline_text(kind, str(target), "ngram" if kind == "ngram" else str(drafter), opts["k"])
    text = text.replace(")\n", f') attributes {{dtype = "{dtype}"}}\n', 1 if kind == "ngram" else 2)
    p = load_pipeline("<test>", text=text)
    if opts.get("passes"):
        p = PassManager(build_passes(opts["passes"])).run(p)
    if kind == "ar":
        p = ar_pipeline(p, stock=False)
    return p


def forced(pipeline, target_folder, prompts, outputs):
    """Token forcing of `outputs` against transformers' plain decoding of the target."""
    from specir.runtime.token_forcing import Reference, force
    reference = Reference.of_model(pipeline.model("target"), "cpu", "transformers")
    return force(reference, prompts, outputs)


def assert_device_step_lossless(kind: str, target, drafter, dtype: str = "f32") -> None:
    """`kind` on the Triton backend (its step lowered op by op; eager in the interpreter) passes
    token forcing at batch 1 and 2 (5 new tokens each); drafting kinds must get at least one
    drafted token accepted. Only n-gram lookup runs on the host."""
    from specir.runtime.session import make_engine
    p = pipeline(kind, target, drafter, dtype=dtype)
    from tests.triton_backend.conftest import DEVICE
    engine = make_engine(p, "triton", DEVICE, None)
    assert [seg["host"] for seg in engine.program.describe()] == ([True, False] if kind == "ngram" else [False])
    for batch in (1, 2):
        prompts = PROMPTS[:batch]
        results = engine.generate(prompts, 5)
        assert all(len(r.tokens) == 5 == sum(r.accept_lengths) for r in results)
        report = forced(p, target, prompts, [r.tokens for r in results])
        assert report.checked == 5 * batch and report.mismatches == 0, report.as_dict()
        if kind in ("chain", "tree"):
            assert max(max(r.accept_lengths) for r in results) > 1, "no drafted token was ever accepted"
