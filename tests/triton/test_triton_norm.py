import pytest
import torch

from specir import kernel_reference as ref
from specir.backends.triton.kernels.norm import add_rms_norm, rms_norm


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hidden", [64, 100])
def test_rms_norm(seed, device, kt, dtype, hidden):
    x = (torch.randn(2, 3, hidden) * 3).to(dtype).to(device)
    w = (torch.rand(hidden) + 0.5).to(dtype).to(device)
    out = kt.poisoned(x.shape, dtype, device)
    got = rms_norm(x, w, 1e-6, out=out)
    assert got is out
    kt.close(out, ref.rms_norm_reference(x, w, 1e-6))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("in_place", [False, True])
def test_add_rms_norm(seed, device, kt, dtype, in_place):
    hidden = 96
    x = torch.randn(5, hidden).to(dtype).to(device)
    residual = (torch.randn(5, hidden) * 4).to(dtype).to(device)
    w = torch.randn(hidden).to(dtype).to(device)
    want_out, want_res = ref.add_rms_norm_reference(x, residual, w, 1e-5)
    out = kt.poisoned(x.shape, dtype, device)
    res_out = residual if in_place else kt.poisoned(x.shape, dtype, device)
    add_rms_norm(x, residual, w, 1e-5, out=out, residual_out=res_out)
    kt.close(res_out, want_res)
    kt.close(out, want_out)


def test_rms_norm_allocates_when_no_out(seed, device, kt):
    x = torch.randn(1, 128, device=device)
    w = torch.rand(128, device=device)
    kt.close(rms_norm(x, w, 1e-6), ref.rms_norm_reference(x, w, 1e-6))
