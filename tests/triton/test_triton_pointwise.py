"""The hybrid pointwise ops' Triton kernels (kernels/pointwise.py) against the torch reference
(backends/reference/hybrid.py): every activation, the product and the scale (factor, divisor,
per-segment vector, each alone and together), fp32 and bf16, on column slices of wider buffers."""
import pytest
import torch

from specir.backends.reference import hybrid as ref
from specir.backends.triton.kernels import pointwise


def _view(B, T, W, dtype, device, gen, spread=3.0):
    wide = torch.randn(B, T, W + 24, generator=gen) * spread
    return wide.to(device, dtype)[..., 16:16 + W]


@pytest.mark.parametrize("fn", pointwise.FUNCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_activation_matches_the_reference(fn, dtype, seed, device, kt):
    gen = torch.Generator().manual_seed(seed)
    x = _view(2, 3, 1500, dtype, device, gen)  # two channel blocks, the second partial
    out_buf = kt.poisoned((2, 3, 1508), dtype, device)
    pointwise.activation(x, fn, out=out_buf[..., 8:])
    kt.close(out_buf[..., 8:], ref.activation({"fn": fn}, None, x), dtype)
    assert torch.isnan(out_buf[..., :8].float()).all()  # nothing written outside the view


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mul_matches_the_reference(dtype, seed, device, kt):
    gen = torch.Generator().manual_seed(seed)
    a, b = _view(3, 2, 700, dtype, device, gen), _view(3, 2, 700, dtype, device, gen)
    kt.close(pointwise.mul(a, b), ref.mul({}, None, a, b), dtype)


@pytest.mark.parametrize("params", [dict(factor=1.5), dict(divisor=4.0), dict(segments=[300, 200, 12], factors=[0.5, 1.25, 2.0]),
                                    dict(factor=0.75, divisor=3.0, segments=[12, 500], factors=[1.2, 0.6])],
                         ids=["factor", "divisor", "segments", "all"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scale_matches_the_reference(params, dtype, seed, device, kt):
    gen = torch.Generator().manual_seed(seed)
    x = _view(2, 2, 512, dtype, device, gen)
    vector = None
    if params.get("segments"):
        vector = torch.repeat_interleave(torch.tensor(params["factors"]), torch.tensor(params["segments"])).to(device, dtype)
    got = pointwise.scale(x, params.get("factor", 1.0), params.get("divisor", 1.0), vector)
    kt.close(got, ref.scale(dict(params), None, x), dtype)


def test_bad_operands_are_refused(device):
    x = torch.zeros(1, 2, 8, device=device)
    with pytest.raises(ValueError, match="unknown activation"):
        pointwise.activation(x, "swish")
    with pytest.raises(ValueError, match="one shape"):
        pointwise.mul(x, torch.zeros(1, 2, 4, device=device))
    with pytest.raises(ValueError, match="vector must be"):
        pointwise.scale(x, vector=torch.ones(4, device=device))


@pytest.mark.parametrize("params", [dict(start=0, size=16, group=48), dict(start=16, size=32, group=48),
                                    dict(start=100, size=60)], ids=["grouped_head", "grouped_tail", "row"])
def test_slice_matches_the_reference(params, seed, device):
    gen = torch.Generator().manual_seed(seed)
    x = _view(2, 3, 192, torch.bfloat16, device, gen)
    got = pointwise.slice_(x, params["start"], params["size"], params.get("group"))
    assert torch.equal(got, ref.slice_(dict(params), None, x))  # a copy: exact


def test_concat_matches_the_reference(seed, device):
    gen = torch.Generator().manual_seed(seed)
    xs = [_view(2, 2, w, torch.bfloat16, device, gen) for w in (40, 1030, 7)]
    out_buf = torch.full((2, 2, 1100), float("nan"), dtype=torch.bfloat16, device=device)
    pointwise.concat(*xs, out=out_buf[..., 10:1087])
    assert torch.equal(out_buf[..., 10:1087], ref.concat({}, None, *xs))
    assert torch.isnan(out_buf[..., :10].float()).all() and torch.isnan(out_buf[..., 1087:].float()).all()
    with pytest.raises(ValueError, match="does not fit"):
        pointwise.slice_(xs[0], 30, 20)
