"""The hybrid norms' Triton kernels (kernels/hybrid_norm.py) against the torch reference
(backends/reference/hybrid.py): per-group and whole-row norms, a weight per group and one repeated
over the row, gate first and gate after, fp32 and bf16, and inputs and outputs that are column
slices of wider buffers (as a forward's views are)."""
import pytest
import torch

from specir.backends.reference import hybrid as ref
from specir.backends.triton.kernels.hybrid_norm import rms_norm_1p, rms_norm_gated

# (width, group, weight length)
SHAPES = [(256, None, 256), (512, 128, 128), (96, 32, 32), (384, 128, 384)]


def _slice_of_wider(B, T, width, dtype, device, gen):
    wide = torch.randn(B, T, width + 40, generator=gen).to(device, dtype)
    return wide[..., 24:24 + width]  # a strided view with a unit last stride


@pytest.mark.parametrize("shape", SHAPES, ids=[f"w{w}_g{g}_W{n}" for w, g, n in SHAPES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_1p_matches_the_reference(shape, dtype, seed, device, kt):
    width, group, wlen = shape
    if wlen != (group or width):
        pytest.skip("1p's weight is one group's")
    gen = torch.Generator().manual_seed(seed)
    x = _slice_of_wider(2, 3, width, dtype, device, gen) * 3
    w = (torch.randn(wlen, generator=gen) * 0.2).to(device, dtype)
    out_buf = kt.poisoned((2, 3, width + 8), dtype, device)
    out = out_buf[..., 8:]
    rms_norm_1p(x, w, 1e-6, group, out=out)
    expected = ref.rms_norm_1p({"weight": w, "eps": 1e-6, "group": group}, None, x)
    kt.close(out, expected, dtype)
    assert torch.isnan(out_buf[..., :8].float()).all()  # nothing written outside the view


@pytest.mark.parametrize("shape", SHAPES, ids=[f"w{w}_g{g}_W{n}" for w, g, n in SHAPES])
@pytest.mark.parametrize("gate_first", [False, True], ids=["gate_after", "gate_first"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_gated_matches_the_reference(shape, gate_first, dtype, seed, device, kt):
    width, group, wlen = shape
    gen = torch.Generator().manual_seed(seed)
    x = _slice_of_wider(3, 2, width, dtype, device, gen)
    gate = _slice_of_wider(3, 2, width, dtype, device, gen) * 2
    w = (1 + torch.randn(wlen, generator=gen) * 0.2).to(device, dtype)
    out = rms_norm_gated(x, gate, w, 1e-5, group, gate_first)
    params = {"weight": w, "eps": 1e-5, "group": group, "gate_first": gate_first}
    kt.close(out, ref.rms_norm_gated(params, None, x, gate), dtype)


@pytest.mark.parametrize("gated", [False, True], ids=["1p", "gated"])
def test_one_row_a_program_gives_the_same_bits(gated, seed, device, monkeypatch):
    """ROWS (hybrid_norm._rows_per_program): the GPU's one row a program and the interpreter's many compute each
    row alike (here 6 rows in one program against 6 programs, bf16, a per-group weight)."""
    from specir.backends.triton.kernels import hybrid_norm

    gen = torch.Generator().manual_seed(seed)
    x = _slice_of_wider(2, 3, 512, torch.bfloat16, device, gen)
    gate = _slice_of_wider(2, 3, 512, torch.bfloat16, device, gen)
    w = (1 + torch.randn(128, generator=gen) * 0.2).to(device, torch.bfloat16)
    run = (lambda: rms_norm_gated(x, gate, w, 1e-5, 128)) if gated else (lambda: rms_norm_1p(x, w, 1e-6, 128))
    many = run()
    monkeypatch.setattr(hybrid_norm, "_rows_per_program", lambda rows, block: 1)
    assert torch.equal(run().view(torch.int16), many.view(torch.int16))


def test_shapes_that_do_not_tile_are_refused(device):
    x = torch.zeros(1, 1, 100, device=device)
    with pytest.raises(ValueError, match="groups must tile"):
        rms_norm_1p(x, torch.zeros(30, device=device), 1e-6, 30)
    with pytest.raises(ValueError, match="does not match"):
        rms_norm_gated(x, torch.zeros(1, 1, 50, device=device), torch.zeros(100, device=device), 1e-6)
