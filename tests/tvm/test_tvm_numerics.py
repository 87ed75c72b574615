"""The TIR numeric helpers: polynomial exp accuracy and integer bf16 rounding."""

import pytest
import torch


def _compile_elementwise(expr_of):
    import tvm
    from tvm import s_tir, te

    n = te.var("n", "int64")
    x = te.placeholder((n,), "float32", name="x")
    y = te.compute((n,), lambda i: expr_of(x[i]), name="y")
    sch = s_tir.Schedule(te.create_prim_func([x, y]))
    (i,) = sch.get_loops(sch.get_sblock("y"))
    sch.vectorize(sch.split(i, [None, 8])[1])
    return tvm.compile(sch.mod, target="llvm")["main"]


def _run(fn, x):
    y = torch.empty_like(x)
    fn(x, y)
    return y


@pytest.fixture(scope="module")
def exp_fn():
    from specir.backends.tvm.numerics import exp_f32

    return _compile_elementwise(exp_f32)


def test_exp_f32_accuracy(exp_fn):
    x = torch.cat([torch.empty(200_000).uniform_(-87.3, 88.3), torch.linspace(-87.3, 88.3, 10_001)])
    y = _run(exp_fn, x)
    rel = ((y.double() - x.double().exp()) / x.double().exp()).abs().max().item()
    assert rel < 3 * 2**-24, rel


def test_exp_f32_edges(exp_fn):
    x = torch.tensor([float("-inf"), -1000.0, -87.5, 0.0, 89.0, float("inf")])
    y = _run(exp_fn, x)
    assert y.tolist() == [0.0, 0.0, 0.0, 1.0, float("inf"), float("inf")]


def test_round_to_bf16_is_round_to_nearest_even():
    from specir.backends.tvm.numerics import round_to

    fn = _compile_elementwise(lambda v: round_to("bfloat16", v))
    bits = torch.randint(0, 2**31 - 1, (100_000,), dtype=torch.int32)
    x = torch.cat([bits.view(torch.float32), torch.tensor([1.0 + 2**-8, 1.0 + 3 * 2**-8, float("nan"), float("inf")])])
    y = _run(fn, x)
    ref = x.bfloat16().float()
    same = (y == ref) | (y.isnan() & ref.isnan())
    assert same.all()
