"""A forward run for its cache writes only (the engine's prefill) runs just the ops the cache writes
depend on, writes exactly the cache a full forward writes, and never computes the lm_head."""
from __future__ import annotations

import pytest
import torch

from specir.load import load_pipeline
from specir.runtime.weights import load_weights
from specir.step.forward_inputs import ForwardInputs
from tests.helpers.specs import write_spec


def _inputs(B, T, device="cpu"):
    inputs = ForwardInputs.allocate(B, T, device)
    inputs.ids.copy_((torch.arange(B * T).view(B, T) * 7) % 250 + 1)
    inputs.pos.copy_(torch.arange(T)[None].expand(B, T))
    return inputs


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_caches_only_forward_writes_the_same_cache(backend, pair, tmp_path):
    model = load_pipeline(write_spec(tmp_path, "ar", pair[0], dtype="f32")).model("target")
    weights = load_weights(model)
    if backend == "reference":
        from specir.runtime.model_runner import ModelRunner
        executor = ModelRunner(model, weights, slots=1, max_seq=1)
        skipped = {op.name for i, op in enumerate(model.graph.ops) if i not in executor.cache_ops()}
        assert "embed" not in skipped and "attention" not in skipped
        assert model.graph.ops[-1].name == "linear" and len(model.graph.ops) - 1 not in executor.cache_ops()
    else:
        pytest.importorskip("triton")
        import os
        if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
            pytest.skip("needs the Triton interpreter or a GPU")
        from specir.backends.triton.compiled_model import CompiledModel
        from specir.backends.triton.forward import cache_launches
        device = "cuda" if torch.cuda.is_available() else "cpu"  # on a CPU: the interpreter
        executor = CompiledModel(model, {k: v.to(device) for k, v in weights.items()}, device)
        assert len(executor.program.launches) - 1 not in cache_launches(executor.program)
    full_cache, short_cache = executor.new_cache(2, 16), executor.new_cache(2, 16)
    inputs = _inputs(2, 5, "cpu" if backend == "reference" else device)
    logits = executor.forward_on(full_cache, inputs).run()
    assert logits is not None and logits.shape[:2] == (2, 5)
    assert executor.forward_on(short_cache, inputs, logits=False).run() is None
    for layer in full_cache.k:
        for a, b in zip(full_cache.layer(layer), short_cache.layer(layer)):
            assert torch.equal(a, b)


def _triton_target(pair, tmp_path):
    """(model, host weights, its Triton CompiledModel, device) of the fp32 test target; skips where
    Triton cannot run (no interpreter and no GPU)."""
    pytest.importorskip("triton")
    import os
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs the Triton interpreter or a GPU")
    from specir.backends.triton.compiled_model import CompiledModel
    model = load_pipeline(write_spec(tmp_path, "ar", pair[0], dtype="f32")).model("target")
    weights = load_weights(model)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return model, weights, CompiledModel(model, {k: v.to(device) for k, v in weights.items()}, device), device


def test_cache_only_forwards_share_their_buffers(pair, tmp_path):
    """Triton: the cache-only forwards of one model (prefills of several shapes) plan their
    intermediates from one SharedPool, so a smaller or equal shape planned after a larger one
    allocates nothing, and each, run in any order, writes the cache a forward of its own would."""
    from specir.backends.triton.forward import StaticForward
    _, _, executor, device = _triton_target(pair, tmp_path)
    cache = executor.new_cache(2, 16)
    big, small = _inputs(2, 6, device), _inputs(1, 4, device)
    first = executor.forward_on(cache, big, logits=False)
    assert first.buffer_bytes > 0
    second = executor.forward_on(cache, small, logits=False)
    assert second.buffer_bytes == 0  # every buffer it needs is a view of one the first planned
    for inputs, forward in ((small, second), (big, first)):
        alone = executor.new_cache(2, 16)
        StaticForward(executor, alone, inputs, logits=False).run()
        forward.run()
        for layer in cache.k:
            for a, b in zip(cache.layer(layer), alone.layer(layer)):
                assert torch.equal(a[:inputs.ids.shape[0], :, :inputs.ids.shape[1]],
                                   b[:inputs.ids.shape[0], :, :inputs.ids.shape[1]])
    with pytest.raises(ValueError):
        StaticForward(executor, cache, big, logits=True, pool=executor._prefill_pool)


def test_every_layers_split_attention_shares_one_workspace(pair, tmp_path):
    """Triton: the split-KV partials are scratch of one launch, so a forward holds one workspace for
    all its attention layers, and its logits still equal the reference executor's."""
    from specir.runtime.model_runner import ModelRunner
    model, weights, executor, device = _triton_target(pair, tmp_path)
    reference = ModelRunner(model, weights, slots=2, max_seq=1024)
    logits = []
    for ex, dev in ((executor, device), (reference, "cpu")):
        cache = ex.new_cache(2, 1024)
        ex.forward_on(cache, _inputs(2, 40, dev), logits=False).run()  # 40 committed rows each
        step = _inputs(2, 1, dev)
        step.lens.fill_(40)
        step.pos.fill_(40)
        forward = ex.forward_on(cache, step)
        logits.append(forward.run().float().cpu())
        if ex is executor:
            layers = [(launch.attrs["heads"], launch.attrs["head_dim"]) for launch in executor.program.launches
                      if launch.kind == "attention"]
            splits = [c["config"]["num_splits"] for c in forward.configs if c["kernel"].startswith("attention")]
            assert len(layers) > 1 and min(splits) > 1
            sizes = {2 * H * n * (D + 1) for (H, D), n in zip(layers, splits)}
            bound = [c.cell_contents for call in forward.calls for c in (call.__closure__ or ())]
            workspaces = {t.data_ptr() for t in bound if isinstance(t, torch.Tensor) and t.dtype == torch.float32
                          and t.dim() == 1 and t.numel() in sizes}
            assert len(workspaces) == 1, "each layer's attention has a workspace of its own"
    assert torch.allclose(logits[0], logits[1], atol=1e-3, rtol=1e-3)


def test_a_forward_that_cannot_be_planned_gives_the_shared_pool_back(pair, tmp_path, monkeypatch):
    """Triton: a cache-only forward whose planning fails midway returns every buffer it took to the
    shared pool (none stays taken by a forward that does not exist)."""
    from specir.backends.triton import forward as forward_module
    _, _, executor, device = _triton_target(pair, tmp_path)
    cache = executor.new_cache(2, 16)
    executor.forward_on(cache, _inputs(2, 6, device), logits=False)  # the pool now holds one forward's buffers
    allocated = executor._prefill_pool.allocated
    real_bind = forward_module.StaticForward._bind
    calls = []

    def failing_bind(self, index, launch, params):
        calls.append(index)
        if len(calls) == 6:
            raise ValueError("a launch that cannot be bound")
        return real_bind(self, index, launch, params)

    monkeypatch.setattr(forward_module.StaticForward, "_bind", failing_bind)
    with pytest.raises(ValueError):
        executor.forward_on(cache, _inputs(2, 6, device), logits=False)
    pool = executor._prefill_pool
    free = sum(buf.numel() * buf.element_size() for stack in pool.free.values() for buf in stack)
    assert not pool.bases and free == pool.allocated >= allocated  # every byte it holds is free again
