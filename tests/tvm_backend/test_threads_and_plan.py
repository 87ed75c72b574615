"""Thread counts: one thread plans (and runs) serial kernels only, more threads add the parallel
variants of big calls (attention always splits over heads); sizing TVM's pool never pins this process to a core."""
from __future__ import annotations

import os

from specir.load import load_pipeline
from tests.helpers.specs import write_spec


def test_serial_plan_at_one_thread_parallel_variants_at_two(tmp_path, pair):
    from specir.backends.tvm.host_target import host_cpu
    from specir.backends.tvm.kernel_plan import plan_kernels
    target, drafter = pair
    pipeline = load_pipeline(write_spec(tmp_path, "tree", target, drafter, k=3, passes="tree-verify{budget=6,topk=2}"))
    serial = plan_kernels(pipeline, host_cpu(), threads=1)
    both = plan_kernels(pipeline, host_cpu(), threads=2)
    assert not any(k.params.get("parallel") for k in serial)
    assert any(k.params.get("parallel") for k in both)
    # small calls keep their serial kernels at two threads; attention always splits over heads
    keys = lambda plan: {(k.kernel, tuple(k.params.items())) for k in plan if k.kernel != "attention"}
    assert keys(serial) <= keys(both)
    assert all(k.params["parallel"] for k in both if k.kernel == "attention")
    assert {k.kernel for k in serial} == {"linear", "rms_norm", "rotary", "silu_mul", "attention"}
    assert any(k.params.get("masked") for k in serial if k.kernel == "attention")  # the tree's masks


def test_sizing_the_pool_keeps_the_process_affinity():
    from specir.backends.tvm.host_target import set_threads
    before = os.sched_getaffinity(0)
    try:
        set_threads(1)
        assert os.sched_getaffinity(0) == before
    finally:
        set_threads(None)
