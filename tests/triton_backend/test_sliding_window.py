"""A sliding-window target (Mistral, window 6) on the Triton backend: prompts and generations longer
than the window, the prefill windowed too, n-gram drafts verified as chains; every token passes
token forcing against the stock graph on the reference backend (explicit key positions)."""
from __future__ import annotations

from specir.load import load_pipeline
from specir.runtime.session import make_engine
from specir.runtime.token_forcing import Reference, force
from tests.helpers.specs import write_spec
from tests.triton_backend.conftest import DEVICE


def test_sliding_window_target_decodes_losslessly_on_triton(family_checkpoints, tmp_path):
    folder = family_checkpoints["mistral"]
    pipeline = load_pipeline(write_spec(tmp_path, "mistral", folder, "ngram", k=3, dtype="f32"))
    assert any(op.attrs.get("window") == 6 for op in pipeline.model("target").graph.ops if op.name == "attention")
    engine = make_engine(pipeline, "triton", DEVICE, None)
    prompts = [[1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2], [7, 8, 9]]
    outputs = [r.tokens for r in engine.generate(prompts, 14)]
    report = force(Reference.of_model(pipeline.model("target"), "cpu", "ir"), prompts, outputs)
    assert report.checked == 28 and report.mismatches == 0, report.as_dict()
