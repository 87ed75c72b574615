"""batch-fusion on hybrid targets: the packed verify runs each recurrent op per request around the
packed rows (specir/runtime/packed_recurrent.py), so node states and commits are the tree's.

Differential: greedy output equals the target's AR decoding at batch 4 (prompts of different
lengths, budgets that drop nodes, chains and trees) for a Gated DeltaNet and a Mamba2 family on the
reference and TVM backends and (interpreter) Triton; `specir check --batch-size 4` token-forces every
request with 0 mismatches; pad rows of a packed forward never write a request's node."""
from __future__ import annotations

import json

import pytest
import torch

from specir.pass_infra import PassManager, build_passes
from specir.pipeline_template import pipeline_text
from specir.runtime.baseline import ar_pipeline
from specir.runtime.packed_recurrent import PackedRows
from specir.runtime.session import make_engine
from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
from tests.helpers.specs import write_prompts
from tests.hybrid.checkpoints import make_hybrid_checkpoint
from tests.hybrid.helpers import pass_pipeline

VOCAB = 259
PROMPTS = [[5, 6, 7, 5, 6, 7, 9, 5, 6], [1, 2, 3], [9, 9, 9, 4], [7, 1, 7, 1, 7]]
FAMILIES = ["qwen3_5", "bamba"]
PASSES = ["batch-fusion{shrink=false}",  # a chain, every drafted token verified
          "tree-verify{budget=6,topk=2},batch-fusion{budget=8,shrink=false}",  # a budget drops nodes
          "tree-verify{budget=6,topk=2},batch-fusion{budget=5,shrink=false,split=equal}"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid_bf")
    drafter = make_checkpoint("llama", root / "d", seed=11, vocab_size=VOCAB, num_hidden_layers=1)
    targets = {f: make_hybrid_checkpoint(f, root / f, seed=40, vocab_size=VOCAB) for f in FAMILIES}
    for folder in (drafter, *targets.values()):
        write_tokenizer(folder, VOCAB)
    return targets, drafter


def fused(checkpoints, family, passes):
    targets, drafter = checkpoints
    return PassManager(build_passes(passes)).run(pass_pipeline(targets[family], drafter))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("passes", PASSES, ids=["chain", "tree-budget", "tree-equal-split"])
@pytest.mark.parametrize("backend", ["reference", "tvm"])
def test_batch_fusion_decodes_as_the_hybrid_target(checkpoints, family, passes, backend):
    pipeline = fused(checkpoints, family, passes)
    assert any(op.name == "verify.packed" for op in pipeline.step.ops)
    got = make_engine(pipeline, backend, "cpu", None).generate(PROMPTS, 10)
    want = make_engine(ar_pipeline(pipeline, stock=False), "reference", "cpu", None).generate(PROMPTS, 10)
    assert [r.tokens for r in got] == [r.tokens for r in want]


def test_triton_packed_verify_of_a_hybrid_decodes_as_the_target(checkpoints):
    import os
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs the Triton interpreter or a GPU")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    pipeline = fused(checkpoints, "qwen3_5", PASSES[1])
    got = make_engine(pipeline, "triton", device, None).generate(PROMPTS[:3], 6)
    # the oracle is plain decoding on the same backend: on a GPU the tiny random hybrid has near-ties where
    # Triton's bf16 and the CPU reference part (session 19 call 6: the plain tree, the fused tree and AR on
    # Triton agree there, the CPU reference does not)
    want = make_engine(ar_pipeline(pipeline, stock=False), "triton", device, None).generate(PROMPTS[:3], 6)
    assert [r.tokens for r in got] == [r.tokens for r in want]


def test_check_token_forces_every_request_of_a_fused_hybrid(checkpoints, specir_cli, tmp_path):
    targets, drafter = checkpoints
    spec = tmp_path / "p.spec"
    spec.write_text(pipeline_text("p", str(targets["bamba"]), str(drafter), 3))
    prompts = write_prompts(tmp_path, 4, VOCAB, seed=3)
    code, out, err = specir_cli("check", spec, "-p", PASSES[1], "--target", "cpu", "--prompts", prompts,
                                "--batch-size", 4, "--max-new-tokens", 8, "--limit", 0, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] and report["mismatches"] == 0 and report["tokens_checked"] == report["tokens_asked"] == 32


def test_pad_rows_never_write_a_request_node():
    """Rows past row_start[R] are pad rows: whatever they hold, the padded layout is the real rows'."""
    slots = torch.tensor([0, 0, 1, 0, 0])  # three real rows (request 0: nodes 0, 1; request 1: node 0), two pad
    nodes = torch.tensor([0, 1, 0, 0, 0])
    mask = torch.zeros(5, 1, 3, dtype=torch.bool)
    mask[0, 0, 0] = mask[1, 0, :2] = mask[2, 0, 0] = True
    mask[3:, 0, 0] = True
    rows = PackedRows.of(slots, nodes, mask, torch.tensor([0, 2, 3]))
    x = torch.tensor([[1.0], [2.0], [3.0], [99.0], [99.0]])[:, None]  # the pad rows hold other values
    padded = rows.pad_into(rows.buffer(x), x)
    assert padded[..., 0].tolist() == [[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]]
    assert rows.parents().tolist() == [[-1, 0, -1], [-1, -1, -1]]
    assert rows.unpad(padded)[:3, 0, 0].tolist() == [1.0, 2.0, 3.0]
