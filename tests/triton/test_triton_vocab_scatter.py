"""vocab_scatter's Triton kernel (kernels/vocab_scatter.py) against the torch reference
(backends/reference/hybrid.py): bit-equal (a copy), -inf at every id not kept, on a column slice of
a wider input buffer and into a view of a wider output, fp32 and bf16, a vocabulary of several
blocks with a partial last one."""
import pytest
import torch

from specir.backends.reference import vocab as ref
from specir.backends.triton.kernels.vocab_scatter import inverse_ids, vocab_scatter


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vocab_scatter_is_the_reference_bit_for_bit(dtype, seed, device, kt):
    gen = torch.Generator().manual_seed(seed)
    V, N = 2500, 300
    ids = torch.randperm(V, generator=gen)[:N].to(torch.int32)
    wide = (torch.randn(2, 3, N + 16, generator=gen) * 4).to(device, dtype)
    x = wide[..., 8:8 + N]
    out_buf = kt.poisoned((2, 3, V + 8), dtype, device)
    vocab_scatter(x, inverse_ids(ids.to(device), V), out=out_buf[..., 8:])
    want = ref.vocab_scatter({"ids": ids, "vocab": V}, None, x)
    got = out_buf[..., 8:]
    assert torch.equal(got, want)
    assert (got[..., [i for i in range(V) if i not in set(ids.tolist())]] == float("-inf")).all()
    assert torch.isnan(out_buf[..., :8].float()).all()  # nothing written outside the view


def test_inverse_ids_maps_each_kept_id_to_its_position(device):
    ids = torch.tensor([7, 2, 9], dtype=torch.int32, device=device)
    assert inverse_ids(ids, 10).tolist() == [-1, -1, 1, -1, -1, -1, -1, 0, -1, 2]
