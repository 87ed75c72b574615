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


def test_cache_only_forwards_share_their_buffers(pair, tmp_path):
    """Triton: the cache-only forwards of one model (prefills of several shapes) plan their
    intermediates from one SharedPool, so a smaller or equal shape planned after a larger one
    allocates nothing, and each, run in any order, writes the cache a forward of its own would."""
    pytest.importorskip("triton")
    import os
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs the Triton interpreter or a GPU")
    from specir.backends.triton.compiled_model import CompiledModel
    from specir.backends.triton.forward import StaticForward
    model = load_pipeline(write_spec(tmp_path, "ar", pair[0], dtype="f32")).model("target")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    executor = CompiledModel(model, {k: v.to(device) for k, v in load_weights(model).items()}, device)
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
