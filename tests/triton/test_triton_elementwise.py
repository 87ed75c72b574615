import pytest
import torch

from specir import kernel_reference as ref
from specir.backends.triton.kernels.activation import silu_mul
from specir.backends.triton.kernels.embedding import embedding


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fused", [True, False])
def test_silu_mul(seed, device, kt, dtype, fused):
    rows, width = 3, 1500                          # > one column block, not a power of two
    gate_up = (torch.randn(rows, 2 * width) * 4).to(dtype).to(device)
    out = kt.poisoned((rows, width), dtype, device)
    if fused:
        silu_mul(gate_up, out=out)
    else:
        silu_mul(gate_up[:, :width], gate_up[:, width:], out=out)   # strided views
    kt.close(out, ref.silu_mul_reference(gate_up))


def test_silu_mul_batched_shape(seed, device, kt):
    gate, up = torch.randn(2, 3, 40, device=device), torch.randn(2, 3, 40, device=device)
    kt.close(silu_mul(gate, up), ref.silu_mul_reference(gate, up))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
def test_embedding(seed, device, kt, dtype, id_dtype):
    vocab, width = 50, 1100
    table = torch.randn(vocab, width).to(dtype).to(device)
    ids = torch.randint(0, vocab, (2, 5), dtype=id_dtype, device=device)
    ids[0, 0], ids[1, 4] = -1, vocab                # out of range -> zero rows
    out = kt.poisoned((2, 5, width), dtype, device)
    embedding(ids, table, out=out)
    want = ref.embedding_reference(ids, table)
    assert torch.equal(out, want)
    assert torch.equal(out[0, 0], torch.zeros_like(out[0, 0]))
