"""The relative-error check kernel tests compare with (a kernel against its reference, or two
kernels that sum in different orders)."""
import torch

# relative-error bounds per activation dtype (see `close`)
# bf16: an element is rounded once in the kernel and once in the reference, and sums in another order:
# up to about four bf16 ulps (2^-8 each) of relative error on the largest elements
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def close(actual, expected, dtype=None, tol=None):
    """Assert every element is finite and |a - e| <= tol * (|e| + rms(e))."""
    tol = TOLERANCE[dtype or expected.dtype] if tol is None else tol
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    a, e = actual.float().cpu(), expected.float().cpu()
    assert torch.isfinite(a).all(), f"{(~torch.isfinite(a)).sum().item()} non-finite (unwritten?) elements"
    scale = e.pow(2).mean().sqrt().item() + 1e-30
    err = ((a - e).abs() / (e.abs() + scale)).max().item()
    assert err <= tol, f"relative error {err:.3g} > {tol:.1g}"
