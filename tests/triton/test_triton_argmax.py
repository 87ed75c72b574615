import pytest
import torch

from specir import kernel_reference as ref
from specir.backends.triton.kernels.argmax import argmax


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,vocab", [(1, 5000), (3, 70)])
def test_argmax(seed, device, kt, dtype, rows, vocab):
    logits = torch.randn(rows, vocab).to(dtype).to(device)
    out = kt.poisoned((rows,), torch.int64, device)
    argmax(logits, out=out)
    assert torch.equal(out, ref.argmax_reference(logits))


def test_argmax_ties_pick_the_first(seed, device):
    logits = torch.randint(0, 3, (4, 3000)).float().to(device)     # many ties at the maximum
    logits[1] = 0.0
    logits[2, 2999] = 9.0
    assert torch.equal(argmax(logits), ref.argmax_reference(logits))


def test_argmax_batched_shape(seed, device):
    logits = torch.randn(2, 3, 100, device=device)
    assert torch.equal(argmax(logits), ref.argmax_reference(logits))
