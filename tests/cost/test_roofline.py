"""The cost model's roofline: a target's fitted step rates and whether its kernels overlap streaming
with compute decide a forward's price; each request of a batch reads its own KV cache."""
from __future__ import annotations

import dataclasses

import pytest

from specir.cost_model import forward_cost
from specir.load import load_pipeline
from specir.targets import get_target
from specir.zoo.paths import zoo_model_dir


@pytest.fixture(scope="module")
def target_model():
    import subprocess
    import sys
    spec = subprocess.run([sys.executable, "-m", "specir.cli.main", "init", "--target-model",
                           str(zoo_model_dir("code-target")), "--drafter", "ngram"],
                          capture_output=True, text=True, check=True).stdout
    return load_pipeline("<init>", text=spec).model("target")


def test_the_roofline_adds_the_non_overlapped_fraction_of_the_shorter_time():
    t = dataclasses.replace(get_target("h200"), step_bandwidth=1e12, step_flops=1e14, step_serial=0.0)
    assert t.roofline(2e12, 1e14) == pytest.approx(2.0)  # max(2 s streaming, 1 s compute)
    assert dataclasses.replace(t, step_serial=1.0).roofline(2e12, 1e14) == pytest.approx(3.0)
    assert dataclasses.replace(t, step_serial=0.5).roofline(1e12, 3e14) == pytest.approx(3.5)


def test_gemm_flops_are_priced_at_rows_rounded_up_to_the_row_tile(target_model):
    t = dataclasses.replace(get_target("h200"), step_row_tile=1)
    tiled = dataclasses.replace(t, step_row_tile=64)
    assert [tiled.gemm_rows(r) for r in (1, 64, 65, 200)] == [64, 64, 128, 256]
    extra = lambda rows: forward_cost(target_model, tiled, rows).flops - forward_cost(target_model, t, rows).flops  # noqa: E731
    assert extra(65) > 0 and extra(65) == pytest.approx(extra(1))  # 63 more GEMM rows each; attention is not tiled


def test_fitted_step_rates_replace_the_copy_bandwidth_and_matmul_rate():
    h200 = get_target("h200")
    plain = dataclasses.replace(h200, step_bandwidth=None, step_flops=None)
    assert plain.bandwidth == h200.copy_bandwidth == h200.device_bandwidth
    assert plain.flops == h200.measured_bf16_flops == h200.device_flops
    if h200.step_bandwidth:
        assert h200.bandwidth == h200.step_bandwidth and h200.flops == h200.step_flops


def test_each_request_of_a_batch_reads_its_own_cache(target_model):
    t = get_target("h200")
    one = forward_cost(target_model, t, tokens=8, context=256, requests=1)
    eight = forward_cost(target_model, t, tokens=8, context=256, requests=8)
    assert one.weight_bytes == eight.weight_bytes
    # 8 requests of 1 new token each read 8 caches of 256 + 1 rows; one request of 8 reads 264 rows
    assert eight.kv_bytes == pytest.approx(one.kv_bytes * 8 * 257 / 264)
    assert eight.seconds > one.seconds


def test_ranked_logit_rows_cost_their_bytes_by_the_logits_dtype(target_model):
    """A GPU target ranks with the Triton kernels (rank_reads = 1: one read of each logit); the CPU
    target with torch (ranking.BYTES_PER_LOGIT by dtype)."""
    from specir.step.ranking import BYTES_PER_LOGIT
    vocab = target_model.graph.result_type.width
    act = 4 if target_model.attrs.get("dtype") == "f32" else 2
    for name, per_logit in (("h200", act), ("cpu", BYTES_PER_LOGIT["f32" if act == 4 else "bf16"])):
        t = get_target(name)
        plain = forward_cost(target_model, t, tokens=8, requests=8)
        ranked = forward_cost(target_model, t, tokens=8, requests=8, ranked_rows=8)
        assert plain.rank_bytes == 0 and ranked.rank_bytes == pytest.approx(8 * vocab * per_logit), name
    assert ranked.seconds >= plain.seconds  # the CPU's fitted roofline: this small forward is compute-bound
    assert forward_cost(target_model, get_target("h200"), tokens=8, requests=8, ranked_rows=8).seconds > \
        forward_cost(target_model, get_target("h200"), tokens=8, requests=8).seconds


def test_a_tree_draft_prices_ranking_its_levels(tmp_path):
    """draft.tree ranks topk rows per request per level: at a large batch that is a real part of
    the draft's price (batch_schedule.draft_seconds), and it grows with the batch."""
    import subprocess
    import sys
    from specir.batch_schedule import draft_seconds, step_forwards
    spec = subprocess.run([sys.executable, "-m", "specir.cli.main", "init", "--target-model",
                           str(zoo_model_dir("code-target")), "--drafter", str(zoo_model_dir("code-drafter"))],
                          capture_output=True, text=True, check=True).stdout
    (tmp_path / "p.spec").write_text(spec)
    opt = subprocess.run([sys.executable, "-m", "specir.cli.main", "opt", str(tmp_path / "p.spec"), "-p",
                          "tree-verify{budget=32,topk=4,depth=4}"], capture_output=True, text=True, check=True).stdout
    pipeline = load_pipeline("<opt>", text=opt)
    _, _, drafts = step_forwards(pipeline)
    assert [f.ranked for f in drafts] == [1, 4]  # the root's row, then topk rows per level
    unranked = [dataclasses.replace(f, ranked=0) for f in drafts]
    t = get_target("h200")
    extra = [draft_seconds(pipeline, drafts, b, t) - draft_seconds(pipeline, unranked, b, t) for b in (1, 64)]
    assert 0 < extra[0] < extra[1]
