"""The launch_overlap option (passes/fusion.py; program.py, forward.py): it prints in the IR, marks
every linear launch `overlap` without changing which launches run, reaches the linear calls (the
forward's configs say so) and leaves the logits bits as without it, for bf16 and BF12 weights and
with the other fusions on. Without a GPU the kernels run plain (tests/triton/test_linear_overlap.py
checks the overlapped kernels on one)."""
from __future__ import annotations

import pytest
import torch

from specir.ir.nodes import Attrs
from tests.triton_backend.pipelines import fusion_pass, pipeline
from tests.triton_backend.test_gemm_route import _forward
from tests.triton_backend.test_norm_linear import BOTH, UNFUSED
from tests.triton_backend.test_swiglu_prologue import _compiled, mlp_pair, packed_pipeline  # noqa: F401


def test_the_option_prints_and_marks_every_linear_launch(tiny_pair):
    from specir.backends.triton.program import plan_program
    from specir.ir.printer import print_pipeline
    from specir.pass_infra import PassManager, build_passes
    p = pipeline("chain", *tiny_pair, dtype="bf16")
    on = PassManager(build_passes(fusion_pass(launch_overlap=True))).run(p)
    assert "launch_overlap = true" in print_pipeline(on)
    overlapped, plain = plan_program(on.model("target")), plan_program(p.model("target").with_attrs(fuse=Attrs(UNFUSED)))
    assert [launch.kind for launch in overlapped.launches] == [launch.kind for launch in plain.launches]
    linears = [launch for launch in overlapped.launches if launch.kind in ("linear", "packed_linear")]
    assert linears and all(launch.attrs.get("overlap") for launch in linears)
    assert not any(launch.attrs.get("overlap") for launch in overlapped.launches if launch not in linears)
    assert not any(launch.attrs.get("overlap") for launch in plain.launches)


@pytest.mark.parametrize("T", [1, 3])
@pytest.mark.parametrize("fuse", [UNFUSED, BOTH], ids=["alone", "with_norm_and_swiglu_linear"])
def test_overlapped_and_plain_logits_are_the_same_bits(mlp_pair, T, fuse):
    model = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    overlapped = _forward(_compiled(model, cublas_min_rows=0, fuse=Attrs({**fuse, "launch_overlap": True})), T)
    linears = [c for c in overlapped.configs if c["kernel"].startswith("linear.")]
    assert linears and all(c.get("overlap") for c in linears)
    plain = _forward(_compiled(model, cublas_min_rows=0, fuse=Attrs({**fuse, "launch_overlap": False})), T)
    assert not any(c.get("overlap") for c in plain.configs)
    assert torch.equal(overlapped.run(), plain.run())


def test_packed_overlapped_and_plain_logits_are_the_same_bits(packed_pipeline):  # noqa: F811
    model = packed_pipeline.model("target")
    overlapped = _forward(_compiled(model, fuse=Attrs({**BOTH, "launch_overlap": True})), 1)
    assert {c["kernel"] for c in overlapped.configs if c.get("overlap")} == {"linear.linear_bf12"}
    assert torch.equal(overlapped.run(), _forward(_compiled(model, fuse=Attrs(BOTH)), 1).run())


PREFETCH = {**BOTH, "launch_overlap": True, "attention_prefetch": True}


def test_attention_prefetch_marks_each_attention_and_the_linear_reading_it(tiny_pair):
    from specir.backends.triton.program import plan_program
    from specir.ir.printer import print_pipeline
    from specir.pass_infra import PassManager, build_passes
    p = pipeline("chain", *tiny_pair, dtype="bf16")
    on = PassManager(build_passes(fusion_pass(launch_overlap=True, attention_prefetch=True))).run(p)
    assert "attention_prefetch = true" in print_pipeline(on)
    launches = plan_program(on.model("target")).launches
    pairs = [(a, b) for a, b in zip(launches, launches[1:]) if a.kind == "attention"]
    assert pairs and all(a.attrs.get("lets_next_start") and b.attrs.get("prefetch_weights") and b.ins[0] == a.outs[0]
                         for a, b in pairs)
    assert sum(bool(launch.attrs.get("prefetch_weights")) for launch in launches) == len(pairs)
    for overlap, prefetch in ((False, True), (True, False)):  # it needs launch_overlap
        off = PassManager(build_passes(fusion_pass(launch_overlap=overlap, attention_prefetch=prefetch))).run(p)
        assert not any(launch.attrs.get("lets_next_start") or launch.attrs.get("prefetch_weights")
                       for launch in plan_program(off.model("target")).launches)


@pytest.mark.parametrize("n, k, per_range", [(4096, 4096, 4), (6144, 4096, 4), (4096, 14336, 7), (2048, 2048, 4),
                                              (4096, 4000, 4), (64, 64, 1)])
def test_a_prefetching_gemv_prefetches_exactly_its_k_range(n, k, per_range):
    """The 8B o projection: 32 iterations of 128 over 8 K ranges -> 4 (not the 8 that would reach into the next
    range); down 112 over 16 -> 7; a ragged K rounds up."""
    from specir.backends.triton.kernels.linear_config import choose, prefetching_its_range
    cfg = choose(1, n, k)
    assert prefetching_its_range(cfg, k).overlap_iters == per_range
    assert prefetching_its_range(cfg, k).order_key() == cfg.order_key()


def _iterations_per_range(config: dict, k: int) -> int:
    return -(-(-(-k // (128 * config["groups"]))) // config["split"])


@pytest.mark.parametrize("T", [1, 3])
def test_attention_prefetch_reaches_one_row_gemvs_only_and_keeps_the_bits(tiny_pair, T):
    from specir.backends.triton.launch_configs import launch_configs
    from specir.targets import get_target
    model = pipeline("chain", *tiny_pair, dtype="bf16").model("target")
    compiled = _compiled(model, cublas_min_rows=0, fuse=Attrs(PREFETCH))
    on = _forward(compiled, T)
    attention = [c for c in on.configs if c["kernel"] == "attention.attention"]
    prefetching = [c for c in on.configs if c["kernel"].startswith("linear.") and c["config"]["overlap_iters"]]
    listed = launch_configs(compiled.program, get_target("h200"), 1, T, 64)  # the manifest: the GPU's configs
    listed_attention = [row for row in listed if row["kernel"] == "attention.attention"]
    listed_prefetching = [row for row in listed if row["kernel"].startswith("linear.") and row["config"]["overlap_iters"]]
    assert attention and len(listed_attention) == len(attention)
    if T == 1:  # each o projection prefetches exactly the iterations of its K range
        assert all(c["lets_next_start"] for c in attention) and len(prefetching) == len(attention)
        assert all(c["config"]["overlap_iters"] == _iterations_per_range(c["config"], c["k"]) for c in prefetching)
        assert all(row["lets_next_start"] for row in listed_attention) and len(listed_prefetching) == len(attention)
        assert all(row["config"]["overlap_iters"] == _iterations_per_range(row["config"], row["k"])
                   for row in listed_prefetching)
    else:  # the linear after the attention is a GEMM: nothing prefetches, the attention lets nothing start
        assert not prefetching and not any(c["lets_next_start"] for c in attention)
        assert not listed_prefetching and not any(row["lets_next_start"] for row in listed_attention)
    plain = _forward(_compiled(model, cublas_min_rows=0, fuse=Attrs({**PREFETCH, "attention_prefetch": False})), T)
    assert not any(c["lets_next_start"] for c in plain.configs if c["kernel"] == "attention.attention")
    assert torch.equal(on.run(), plain.run())
