"""Hybrid targets of every family on the Triton step backend (backends/triton: the recurrent ops
as the Triton recurrent kernels over the cache's state store, the hybrid norms, pointwise ops,
slices and concatenations as Triton launches), run end to end by the StepEngine under
TRITON_INTERPRET=1 without a GPU: chain and tree pipelines
(fp32 activations, bf16 weights) give exactly the tokens of plain greedy decoding, which pass
token forcing against transformers' forward; a build compiled for the H200 runs through
`specir run` on the interpreter. Models are two layers (one recurrent, one attention) and
outputs short: every program is interpreted in Python."""
from __future__ import annotations

import json
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from specir.load import load_pipeline  # noqa: E402
from specir.runtime.session import make_engine  # noqa: E402
from tests.helpers.checkpoints import make_checkpoint, write_tokenizer  # noqa: E402
from tests.helpers.specs import write_spec  # noqa: E402
from tests.hybrid.checkpoints import make_hybrid_checkpoint  # noqa: E402
from tests.hybrid.helpers import forced_greedy  # noqa: E402

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TWO_LAYERS = {"qwen3_5": dict(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"]),
              "qwen3_next": dict(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"]),
              "nemotron_h": dict(layers_block_type=["linear_attention", "full_attention"]),
              "bamba": dict(num_hidden_layers=2, attn_layer_indices=[1]),
              "falcon_h1": dict(num_hidden_layers=1),  # attention and Mamba2 side by side in every layer
              "granitemoehybrid": dict(num_hidden_layers=2, layer_types=["mamba", "attention"])}
PROMPTS = [[1, 2, 3, 4], [9, 8, 7]]


def _pair(family, root, vocab=None):
    extra = {"vocab_size": vocab} if vocab else {}
    target = make_hybrid_checkpoint(family, root / "t", seed=5, **TWO_LAYERS[family], **extra)
    drafter = make_checkpoint(family, root / "d", noise_from=target, noise=0.02)
    return target, drafter


@pytest.mark.parametrize("family,kind", [("qwen3_5", "tree"), ("nemotron_h", "chain"), ("qwen3_next", "chain"),
                                         ("bamba", "tree"), ("falcon_h1", "chain"), ("granitemoehybrid", "tree")])
def test_triton_step_engine_equals_greedy(family, kind, tmp_path):
    target, drafter = _pair(family, tmp_path)
    expected = forced_greedy(target, PROMPTS, 5)
    passes = "tree-verify{budget=6,topk=2}" if kind == "tree" else ""
    spec = write_spec(tmp_path, kind, target, drafter, k=3, passes=passes, dtype="f32")
    results = make_engine(load_pipeline(spec), "triton", DEVICE, None).generate(PROMPTS, 5)
    assert [r.tokens for r in results] == expected
    assert max(r.tau for r in results) > 1.0  # the drafter was accepted: recurrent state committed past one node


def test_h200_build_runs_on_the_interpreter(tmp_path, specir_cli):
    target, drafter = _pair("qwen3_5", tmp_path, vocab=259)
    for folder in (target, drafter):
        write_tokenizer(folder, 259)
    spec = write_spec(tmp_path, "tree", target, drafter, k=3, passes="tree-verify{budget=6,topk=2}")
    build = tmp_path / "build"
    code, out, err = specir_cli("compile", spec, "--target", "h200", "-o", build)
    assert code == 0, err
    manifest = json.loads((build / "manifest.json").read_text())
    kernels = {row["kernel"]: row["backend"] for row in manifest["kernels"]}
    for name in ("conv1d.conv1d_tree", "gated_delta.gated_delta_rule_tree", "hybrid_norm.rms_norm_1p",
                 "hybrid_norm.rms_norm_gated", "pointwise.activation", "pointwise.mul", "pointwise.slice_"):
        assert kernels[f"specir.backends.triton.kernels.{name}"] == "triton"
    assert set(kernels.values()) <= {"triton", "cublas"}  # no hybrid op runs as a torch fallback
    code, out, err = specir_cli("run", build, "--prompt-ids", "5,6,7,8", "--max-new-tokens", 4, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["backend"] == "triton"
    from tests.hybrid.helpers import ar_pipeline
    expected = make_engine(ar_pipeline(target, "bf16"), "reference", "cpu", None).generate([[5, 6, 7, 8]], 4)
    assert report["tokens"] == expected[0].tokens
