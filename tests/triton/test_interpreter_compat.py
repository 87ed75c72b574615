"""The interpreter speed-ups in `_interpreter_compat` change no result: the fast bf16 <-> fp32 conversion
gives the interpreter's own bits, block types and tensors keep their shapes, names and sizes, and a
kernel's device-function calls inside a launch run with the language patched and leave it restored."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from specir.backends.triton.kernels._interpreter_compat import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="the interpreter's patches (TRITON_INTERPRET=1)")


def _converter():
    from specir.backends.triton.kernels import _interpreter_compat
    from triton.runtime import interpreter
    _interpreter_compat.install()
    fast = interpreter._convert_float
    assert hasattr(fast, "original"), "install() did not put the fast conversion in place"
    return fast, fast.original


def _assert_same(fast, original, data, src, dst, rounding=None):
    want, got = original(data, src, dst, rounding), fast(data, src, dst, rounding)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def test_bf16_to_fp32_gives_the_interpreters_bits_for_every_bf16_value():
    fast, original = _converter()
    every = np.arange(1 << 16, dtype=np.uint16)
    exponent, mantissa = every & 0x7F80, every & 0x007F
    _assert_same(fast, original, every[(exponent != 0) | (mantissa == 0)], tl.bfloat16, tl.float32)  # shifts
    _assert_same(fast, original, every.reshape(256, 256), tl.bfloat16, tl.float32)  # with subnormals


def test_fp32_to_bf16_truncates_as_the_interpreter_does():
    fast, original = _converter()
    rng = np.random.default_rng(0)
    bits = np.concatenate([rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32),
                           np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x00800000,
                                     0x3F808000, 0x7F7FFFFF], dtype=np.uint32)])
    normal = bits[(bits & 0x7F800000) != 0]
    _assert_same(fast, original, normal.view(np.float32), tl.float32, tl.bfloat16)
    _assert_same(fast, original, bits.view(np.float32), tl.float32, tl.bfloat16)  # subnormals: the original
    from triton._C.libtriton import ir
    _assert_same(fast, original, normal.view(np.float32), tl.float32, tl.bfloat16, ir.ROUNDING_MODE.RTNE)


def test_block_types_and_tensors_keep_their_shapes_and_names():
    _converter()
    t = tl.block_type(tl.float32, [4, tl.constexpr(8)])
    assert list(t.shape) == [4, 8] and t.numel == 32 and t.name == "<['4', '8'], fp32>"
    assert t == tl.block_type(tl.float32, (4, 8)) and t != tl.block_type(tl.float16, [4, 8])
    assert t.with_element_ty(tl.int32) == tl.block_type(tl.int32, [4, 8])
    ptr = tl.block_type(tl.pointer_type(tl.bfloat16), [2])
    assert ptr.with_element_ty(tl.pointer_type(tl.bfloat16, const=True)).element_ty.is_const()
    with pytest.raises(TypeError):
        tl.block_type(tl.float32, [])
    x = tl.tensor(None, t)
    assert [int(s) for s in x.shape] == [4, 8] and int(x.numel) == 32 and x.dtype == tl.float32
    s = tl.tensor(None, tl.int32)
    assert len(s.shape) == 0 and int(s.numel) == 1
    assert bool(t.shape == [4, 8]) and not bool(t.shape == [8, 4])


@triton.jit
def _scaled(x, scale):
    return x * scale + 1.0


@triton.jit
def _helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n, other=0.0).to(tl.float32)
    y = _scaled(_scaled(x, 2.0), 0.5)
    tl.store(out_ptr + i, y.to(tl.bfloat16), mask=i < n)


def test_device_function_calls_inside_a_launch_run_patched_and_leave_the_language_restored():
    _converter()
    load_before = tl.load
    x = torch.randn(37).to(torch.bfloat16)
    for _ in range(2):  # a second launch patches again and finds the same
        out = torch.empty_like(x)
        _helper_kernel[(1,)](x, out, x.numel(), BLOCK=64)
        want = ((x.float() * 2.0 + 1.0) * 0.5 + 1.0)
        # the interpreter's .to(bf16) truncates (kernels round with _numerics.round_to first)
        assert torch.equal(out.view(torch.int16), (want.view(torch.int32) >> 16).to(torch.int16))
    assert tl.load is load_before
