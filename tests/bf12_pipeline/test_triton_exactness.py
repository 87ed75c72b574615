"""The Triton backend runs packed_linear with linear_bf12 (in Triton's CPU interpreter without a
GPU): a packed pipeline's logits equal the unpacked pipeline's bit for bit, over a prefill and a
one-token decode (the GEMM and GEMV paths)."""
from __future__ import annotations

import pytest
import torch

from specir.runtime.weights import load_weights
from tests.bf12_pipeline.test_reference_exactness import plain_and_packed

pytest.importorskip("triton")


def triton_logits(model, prompt: list[int], device: str) -> list[torch.Tensor]:
    from specir.backends.triton.compiled_model import CompiledModel
    from specir.backends.triton.runner import TritonModelRunner
    runner = TritonModelRunner(CompiledModel(model, load_weights(model, device), device), slots=1, max_seq=16)
    ids = torch.tensor([prompt], device=device)
    prefill = runner.forward([0], ids, torch.arange(len(prompt), device=device)[None])
    runner.cache.lens[0] = len(prompt)
    nxt = prefill[:, -1:].argmax(-1)
    decode = runner.forward([0], nxt, torch.tensor([[len(prompt)]], device=device))
    return [prefill, decode]


@pytest.fixture(scope="module")
def one_layer(tmp_path_factory):
    """A one-layer Llama, hidden 256 (the interpreter's time grows with every launch)."""
    from tests.bf12_pipeline.conftest import SPARSE, WIDE, make_sparse
    from tests.helpers.checkpoints import make_checkpoint
    folder = make_checkpoint("llama", tmp_path_factory.mktemp("bf12_triton") / "m", seed=24,
                             **{**WIDE, "num_hidden_layers": 1, "intermediate_size": 256})
    make_sparse(folder, SPARSE.replace("layers.1", "layers.0"))  # one matrix stays bf16
    return folder


def test_triton_logits_are_bitwise_identical_with_packed_weights(one_layer):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    plain, packed = plain_and_packed(one_layer)
    model = packed.model("target")
    assert [op.name for op in model.graph.ops].count("packed_linear") == 7  # 6 of 7 layer matrices + lm_head
    a = triton_logits(plain.model("target"), [5, 17, 99], device)
    b = triton_logits(model, [5, 17, 99], device)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_a_group_with_a_plain_member_runs_as_one_packed_launch_with_the_same_bits(one_layer):
    """k_proj left bf16 by `skip`: q|k|v still run as one launch (k packed when loaded), as in the
    unpacked plan, and the logits keep their bits."""
    from specir.backends.triton.program import plan_program
    from specir.pass_infra import PassManager, build_passes
    device = "cuda" if torch.cuda.is_available() else "cpu"
    plain, _ = plain_and_packed(one_layer)
    mixed = PassManager(build_passes("pack-weights{skip=*k_proj*}")).run(plain).model("target")
    assert {op.attrs["weight"] for op in mixed.graph.ops if op.name == "linear"} == {
        "model.layers.0.self_attn.k_proj.weight", "model.layers.0.mlp.down_proj.weight"}
    launches = lambda m: [(launch.kind, launch.ops) for launch in plan_program(m).launches]  # noqa: E731
    qkv = [launch for launch in launches(mixed) if "%l0.k" in launch[1] and "linear" in launch[0]]
    assert len(qkv) == 1 and qkv[0][0] == "packed_linear"
    assert [ops for _, ops in launches(mixed)] == [ops for _, ops in launches(plain.model("target"))]
    for x, y in zip(triton_logits(plain.model("target"), [5, 17, 99], device), triton_logits(mixed, [5, 17, 99], device)):
        assert torch.equal(x, y)
