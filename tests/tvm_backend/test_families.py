"""The other Llama-family graphs on the TVM kernel table: Qwen2 (q/k/v biases, tied embeddings),
Qwen3 (per-head qk-norm through rms_norm `group`, yarn rope with an attention factor) and Mistral
(sliding window: attention on the reference kernel). Batch 2 with ragged prompts; every token
passes token forcing against the stock graph on the reference backend."""
from __future__ import annotations

import pytest

from specir.load import load_pipeline
from specir.runtime.session import make_engine
from specir.runtime.token_forcing import Reference, force
from tests.helpers.specs import write_spec


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "mistral"])
def test_family_decodes_losslessly_on_tvm(family, family_checkpoints, tmp_path):
    from specir.backends.tvm.lowering import kernels_for
    folder = family_checkpoints[family]
    pipeline = load_pipeline(write_spec(tmp_path, family, folder, "ngram", k=3))
    engine = make_engine(pipeline, "tvm", "cpu", None)
    prompts = [[1, 2, 3, 4, 5, 1, 2, 3, 4], [7, 8, 9]]
    outputs = [r.tokens for r in engine.generate(prompts, 12)]
    report = force(Reference.of_model(pipeline.model("target"), "cpu", "ir"), prompts, outputs)
    assert report.checked == 24 and report.mismatches == 0, report.as_dict()
