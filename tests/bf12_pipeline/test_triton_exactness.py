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
