"""The kernels take tensors that do not start on a 64-byte boundary (a weight memory-mapped from a
float32 safetensors file): the wrappers hand TVM an aligned copy instead of faulting."""
import torch

from specir.backends.tvm.alignment import aligned, is_aligned


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    raw = torch.empty(t.numel() + 16, dtype=t.dtype)
    start = next(i for i in range(1, 16) if (raw.data_ptr() + i * t.element_size()) % 64)
    view = raw[start:start + t.numel()].view(t.shape)
    view.copy_(t)
    assert not is_aligned(view)
    return view


def test_aligned_copies_only_when_needed():
    t = torch.randn(5, 7)
    assert aligned(t) is t
    m = _misaligned(t)
    a = aligned(m)
    assert is_aligned(a) and torch.equal(a, t)


def test_float32_kernels_take_misaligned_tensors(kernels):
    x, w = torch.randn(3, 64), torch.randn(64)
    ref = kernels.rms_norm(x, w, 1e-6)
    torch.testing.assert_close(kernels.rms_norm(_misaligned(x), _misaligned(w), 1e-6), ref, rtol=0, atol=0)
    lw, lb = torch.randn(48, 64), torch.randn(48)
    ref = kernels.linear(x, lw, lb)
    torch.testing.assert_close(kernels.linear(_misaligned(x), _misaligned(lw), _misaligned(lb)), ref, rtol=0, atol=0)
    g, u = torch.randn(3, 64), torch.randn(3, 64)
    torch.testing.assert_close(kernels.silu_mul(_misaligned(g), _misaligned(u)), kernels.silu_mul(g, u), rtol=0, atol=0)
