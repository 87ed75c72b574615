"""The linear_rope_kv fusion (passes/fusion.py; program.py, forward.py, launch_configs.py): the q|k|v
linear group does its attention's rope + KV write in its epilogue, so a layer loses its rope_kv_write
launch. A one-token forward runs it in the GEMV; other row counts (skinny GEMM, cuBLAS) run the
linear and then the rope_kv_write launch. Either way the logits and the KV cache are the bits of the
forward without the fusion, for bf16 and BF12 weights and with the other fusions on; the launch
listing says the same as the forward's configs."""
from __future__ import annotations

import pytest
import torch

from specir.backends.triton.kernels.rope_kv_epilogue import epilogue_runs_here
from specir.ir.nodes import Attrs
from tests.triton_backend.pipelines import fusion_pass, pipeline
from tests.triton_backend.test_norm_linear import BOTH, UNFUSED
from tests.triton_backend.test_swiglu_prologue import _compiled, mlp_pair, packed_pipeline  # noqa: F401

ROPE = {**UNFUSED, "linear_rope_kv": True}
ALL = {**BOTH, "linear_rope_kv": True, "launch_overlap": True}


def _runs_here() -> bool:
    from tests.triton_backend.conftest import DEVICE
    return epilogue_runs_here(torch.device(DEVICE))


def _run(model, T: int, lens: int = 4):
    """(logits, layer 0's k and v caches, the forward's configs) of one forward of T tokens."""
    from specir.backends.triton.forward import ForwardInputs
    cache = model.new_cache(1, 64)
    k, v = cache.layer(0)
    k.copy_(torch.randn(k.shape).to(k.dtype))  # cache rows the forward must not touch
    v.copy_(torch.randn(v.shape).to(v.dtype))
    inputs = ForwardInputs.allocate(1, T, model.device)
    inputs.ids.copy_(torch.arange(T)[None] * 7 % 250 + 3)
    inputs.pos.copy_(torch.arange(T)[None] + lens)
    inputs.lens.fill_(lens)
    forward = model.forward(cache, inputs)
    logits = forward.run().clone()
    return logits, [t.clone() for t in cache.layer(0)], forward.configs


def test_the_option_prints_and_a_layer_loses_its_rope_kv_write_launch(tiny_pair):
    from specir.backends.triton.program import plan_program
    from specir.ir.printer import print_pipeline
    from specir.pass_infra import PassManager, build_passes
    p = pipeline("chain", *tiny_pair, dtype="bf16")
    on = PassManager(build_passes(fusion_pass(linear_rope_kv=True))).run(p)
    assert "linear_rope_kv = true" in print_pipeline(on)
    fused, plain = plan_program(on.model("target")), plan_program(p.model("target").with_attrs(fuse=Attrs(UNFUSED)))
    assert [x.kind for x in plain.launches].count("rope_kv_write") == 1
    assert [x.kind for x in fused.launches] == [x.kind for x in plain.launches if x.kind != "rope_kv_write"]
    qkv = next(x for x in fused.launches if x.attrs.get("epilogue") == "rope_kv_write")
    attention = next(x for x in fused.launches if x.kind == "attention")
    assert qkv.outs == (attention.ins[0],)                 # the rotated q
    assert qkv.ins[-1] == p.model("target").graph.params[1][0]   # the positions
    assert qkv.ops[-1] == "kv_write[0]" and qkv.attrs["head_dim"] == attention.attrs["head_dim"]
    off = PassManager(build_passes(fusion_pass(linear_rope_kv=True, rope_kv_write=False))).run(p)
    assert not any(x.attrs.get("epilogue") for x in plan_program(off.model("target")).launches)


@pytest.mark.parametrize("T", [1, 3])
@pytest.mark.parametrize("fuse", [ROPE, ALL], ids=["alone", "with_every_fusion"])
def test_fused_and_unfused_forwards_are_the_same_bits(mlp_pair, T, fuse):
    model = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    torch.manual_seed(5)
    compiled = _compiled(model, cublas_min_rows=0, fuse=Attrs(fuse))
    logits, caches, configs = _run(compiled, T)
    kernels = [c["kernel"] for c in configs]
    in_gemv = T == 1 and _runs_here()     # one token: in the GEMV's epilogue
    assert kernels.count("rope.rope_kv_write") == (0 if in_gemv else 1)
    assert [c.get("epilogue") for c in configs].count("rope_kv_write") == (1 if in_gemv else 0)
    torch.manual_seed(5)
    want_logits, want_caches, _ = _run(_compiled(model, cublas_min_rows=0,
                                                 fuse=Attrs({**fuse, "linear_rope_kv": False})), T)
    assert torch.equal(logits, want_logits)
    assert all(torch.equal(a, b) for a, b in zip(caches, want_caches))


def test_cublas_routed_and_packed_forwards_are_the_same_bits(mlp_pair, packed_pipeline):  # noqa: F811
    model = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    for m, T, attrs in ((model, 9, dict(cublas_min_rows=8)), (packed_pipeline.model("target"), 1, {})):
        torch.manual_seed(5)
        got = _run(_compiled(m, fuse=Attrs(ROPE), **attrs), T)
        torch.manual_seed(5)
        want = _run(_compiled(m, fuse=Attrs(UNFUSED), **attrs), T)
        assert torch.equal(got[0], want[0]) and all(torch.equal(a, b) for a, b in zip(got[1], want[1]))
        assert ("rope.rope_kv_write" in [c["kernel"] for c in got[2]]) == (T == 9 or not _runs_here())


@pytest.mark.parametrize("verified", [False, True], ids=["gpu_unverified", "gpu_verified"])
@pytest.mark.parametrize("T", [1, 3, 9])
def test_the_launch_listing_matches_the_forward(mlp_pair, monkeypatch, T, verified):
    """The listing (a GPU target's) says what the forward runs: with the epilogue unverified on GPUs
    the rope_kv_write apart at every row count; verified, in the GEMV at one row, with the head-tiled
    config the forward records. The interpreter's forward runs the epilogue at one row."""
    import specir.backends.triton.kernels.rope_kv_epilogue as epilogue
    from specir.backends.triton.launch_configs import launch_configs
    from specir.targets import get_target
    monkeypatch.setattr(epilogue, "VERIFIED_ON_GPU", verified)
    model = pipeline("chain", *mlp_pair, dtype="bf16").model("target")
    compiled = _compiled(model, cublas_min_rows=8, fuse=Attrs(ROPE))
    listed = launch_configs(compiled.program, get_target("h200"), 1, T, 64)
    _, _, configs = _run(compiled, T)
    in_gemv = T == 1 and verified
    if (T == 1 and _runs_here()) == in_gemv:
        assert [r["kernel"] for r in listed[:-1]] == [c["kernel"] for c in configs]
        # (the interpreter widens other launches' blocks: forward.linear_config) the head-tiled GEMV as listed
        tiled = [(r["config"], c["config"]) for r, c in zip(listed, configs) if r.get("epilogue") == "rope_kv_write"]
        assert all(a == b for a, b in tiled)
    implemented = [v for row in listed for v in row["implements"]]
    assert len(implemented) == len(set(implemented)) and "kv_write[0]" in implemented
    gemv = [r for r in listed if r.get("epilogue") == "rope_kv_write"]
    assert len(gemv) == (1 if in_gemv else 0)
    assert [r["kernel"] for r in listed].count("rope.rope_kv_write") == (0 if in_gemv else 1)
    if gemv:
        assert gemv[0]["config"]["block_n"] == compiled.program.launches[gemv[0]["launch"]].attrs["head_dim"]


def test_a_dynamic_rope_rotates_with_each_runs_frequencies(tmp_path):
    """A `dynamic` rope's frequencies depend on the forward's positions: the fused launch and its
    fallback recompute them every run, as the rope launches do (two runs at positions inside and past
    the original context, one forward object)."""
    from specir.backends.triton.forward import ForwardInputs
    from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
    from tests.triton_backend.conftest import VOCAB
    folder = make_checkpoint("llama", tmp_path / "dyn", seed=3, num_hidden_layers=1, vocab_size=VOCAB,
                             intermediate_size=96, initializer_range=0.3, max_position_embeddings=16,
                             rope_parameters={"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0})
    write_tokenizer(folder, VOCAB)
    model = pipeline("chain", folder, folder, dtype="bf16").model("target")
    outputs = []
    for fuse in (ROPE, UNFUSED):
        compiled = _compiled(model, cublas_min_rows=0, fuse=Attrs(fuse))
        assert not all(table.static for table in compiled.ropes.values())
        cache = compiled.new_cache(1, 64)
        inputs = ForwardInputs.allocate(1, 1, compiled.device)
        forward = compiled.forward(cache, inputs)
        runs = []
        for pos in (3, 40):
            inputs.ids.fill_(7)
            inputs.pos.fill_(pos)
            inputs.lens.fill_(pos)
            runs.append((forward.run().clone(), [t.clone() for t in cache.layer(0)]))
        outputs.append(runs)
    for (got, got_cache), (want, want_cache) in zip(*outputs):
        assert torch.equal(got, want) and all(torch.equal(a, b) for a, b in zip(got_cache, want_cache))
