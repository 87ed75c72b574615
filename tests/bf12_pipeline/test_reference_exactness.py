"""pack-weights on real checkpoints, reference backend: the pass's decisions, bitwise-identical
logits and tokens with and without packing, `specir check` with zero mismatches, and compiled
builds whose packed weights the runtime loads instead of packing."""
from __future__ import annotations

import json
import os

import pytest
import torch

from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes
from specir.runtime.session import make_engine
from specir.runtime.model_runner import ModelRunner
from specir.runtime.weights import load_weights
from tests.bf12_pipeline.conftest import SPARSE
from tests.helpers.specs import write_prompts, write_spec

PROMPTS = [[5, 17, 99, 3, 42, 7], [200, 1, 1, 64]]


def plain_and_packed(target, drafter="ngram", dtype=None, tmp_path=None):
    from specir.pipeline_template import pipeline_text
    text = pipeline_text("p", str(target), str(drafter), 3)
    if dtype:
        text = text.replace(")\n", f') attributes {{dtype = "{dtype}"}}\n', 1)
    plain = load_pipeline("<test>", text=text)
    return plain, PassManager(build_passes("pack-weights")).run(plain)


def logits_of(model, prompts, steps: int = 2) -> list[torch.Tensor]:
    """Prefill of a ragged batch (left-aligned, each its own slot), then `steps` one-token forwards."""
    from specir.backends.reference.ops import KERNELS
    runner = ModelRunner(model, load_weights(model), slots=len(prompts), max_seq=32, kernels=KERNELS)
    out = []
    for b, p in enumerate(prompts):
        ids = torch.tensor([p])
        out.append(runner.forward([b], ids, torch.arange(len(p))[None]))
        runner.cache.lens[b] = len(p)
    for _ in range(steps):
        ids = torch.tensor([[int(o[0, -1].argmax())] for o in out[-len(prompts):]])
        pos = torch.tensor([[runner.cache.lens[b]] for b in range(len(prompts))])
        logits = runner.forward(list(range(len(prompts))), ids, pos)
        out += [logits[b:b + 1] for b in range(len(prompts))]
        for b in range(len(prompts)):
            runner.cache.lens[b] += 1
    return out


def test_pass_packs_every_paying_matrix_and_says_why_it_keeps_the_rest(wide_pair, tied_qwen, capsys):
    target, drafter = wide_pair
    _, packed = plain_and_packed(target, drafter)
    err = capsys.readouterr().err
    assert "pack-weights: packed @target 14/15 matrices" in err and "@drafter 15/15 matrices" in err
    tgt = packed.model("target")
    for w in tgt.weights:
        matrix_read_by_linear = w.name.endswith("_proj.weight") or w.name == "lm_head.weight"
        if w.name == SPARSE:
            assert w.type.dtype == "bf16" and w.attrs["bf12"].startswith("kept: heavily sparse (")
        elif matrix_read_by_linear:
            assert w.type.dtype == "bf12" and "bf12" not in w.attrs, w
        else:  # embedding, norms
            assert w.type.dtype == "bf16" and "bf12" not in w.attrs, w
    assert {op.name for op in tgt.graph.ops if op.attrs.get("weight") == SPARSE} == {"linear"}
    assert "packed-weights" in packed.attrs["facts"]

    _, qwen = plain_and_packed(tied_qwen)
    q = qwen.model("target")
    emb = q.weight("model.embed_tokens.weight")
    assert emb.type.dtype == "bf16" and emb.attrs["bf12"] == "kept: tied to the embedding table, which embed reads raw"
    assert q.weight("model.layers.0.self_attn.q_proj.bias").type.dtype == "bf16"
    heads = [op for op in q.graph.ops if op.attrs.get("weight") == "model.embed_tokens.weight"]
    assert [op.name for op in heads] == ["embed", "linear"]
    biased = [op for op in q.graph.ops if op.attrs.get("bias")]
    assert biased and all(op.name == "packed_linear" for op in biased)


def test_pass_defaults_are_decide_defaults():
    from specir.bf12 import decision
    from specir.passes.pack_weights import PackWeights
    opts = PackWeights.options
    assert (opts["max_bits"].default, opts["max_zeros"].default, opts["min_weights"].default) == \
        (decision.MAX_BITS_PER_WEIGHT, decision.MAX_ZERO_FRACTION, decision.MIN_ELEMENTS)


def test_pass_is_idempotent(wide_pair):
    target, drafter = wide_pair
    _, once = plain_and_packed(target, drafter)
    assert PassManager(build_passes("pack-weights")).run(once) == once


@pytest.mark.parametrize("case", ["llama-bf16", "llama-f32", "qwen-tied-bias"])
def test_logits_are_bitwise_identical(case, wide_pair, tied_qwen):
    folder = tied_qwen if case.startswith("qwen") else wide_pair[0]
    plain, packed = plain_and_packed(folder, dtype="f32" if case.endswith("f32") else None)
    a = logits_of(plain.model("target"), PROMPTS)
    b = logits_of(packed.model("target"), PROMPTS)
    assert any(op.name == "packed_linear" for op in packed.model("target").graph.ops)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and torch.equal(x, y)


def test_packed_pipeline_gives_the_same_tokens_and_passes_check(wide_pair, tmp_path, specir_cli):
    target, drafter = wide_pair
    plain, packed = plain_and_packed(target, drafter)
    prompts = [[5, 17, 99, 3, 42, 7], [200, 1, 1, 64], [9, 9, 9]]
    want = make_engine(plain, "reference", "cpu", None).generate(prompts, 16)
    got = make_engine(packed, "reference", "cpu", None).generate(prompts, 16)
    assert [r.tokens for r in got] == [r.tokens for r in want]
    assert [r.accept_lengths for r in got] == [r.accept_lengths for r in want]

    spec = write_spec(tmp_path, "packed", target, drafter, k=3, passes="pack-weights")
    assert "packed_linear" in spec.read_text()
    prompt_file = write_prompts(tmp_path, 8, 259, seed=5)
    code, out, err = specir_cli("check", spec, "--prompts", prompt_file, "--max-new-tokens", 16,
                                "--json", "--limit", 0, "--target", "cpu")
    report = json.loads(out)
    assert code == 0 and report["mismatches"] == 0, (report, err)
    assert report["tokens_checked"] == 8 * 16


def test_compile_stores_packed_weights_and_the_runtime_loads_them(wide_pair, tmp_path, specir_cli, monkeypatch):
    target, drafter = wide_pair
    spec = write_spec(tmp_path, "plain", target, drafter, k=3)
    build = tmp_path / "build"
    code, _, err = specir_cli("compile", spec, "--target", "cpu", "-p", "pack-weights", "-o", build)
    assert code == 0, err
    assert "packed weights of @target: 14 matrices" in err
    manifest = json.loads((build / "manifest.json").read_text())
    entry = manifest["packed_weights"]
    assert set(entry) == {"target", "drafter"}
    assert entry["target"]["file"] == "weights/target.bf12.safetensors" and entry["target"]["matrices"] == 14
    assert entry["target"]["bits_per_weight"] <= 12.35
    assert "weights/target.bf12.safetensors" in manifest["files"]

    def no_packing(*args, **kwargs):
        raise AssertionError("the runtime packed a matrix the build folder holds")
    import specir.bf12
    monkeypatch.setattr(specir.bf12, "pack", no_packing)
    code, out, err = specir_cli("run", build, "--prompt-ids", "5,17,99,3", "--max-new-tokens", 12, "--json")
    assert code == 0, err
    plain = load_pipeline(spec)
    want = make_engine(plain, "reference", "cpu", None).generate([[5, 17, 99, 3]], 12)[0].tokens
    assert json.loads(out)["tokens"] == want

    monkeypatch.undo()  # a checkpoint touched after compile: the build's matrices are not trusted
    st = (target / "model.safetensors").stat()
    os.utime(target / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    code, out, err = specir_cli("run", build, "--prompt-ids", "5,17,99,3", "--max-new-tokens", 12, "--json")
    assert code == 0 and "packing @target's weights at load time" in err, err
    assert json.loads(out)["tokens"] == want
    os.utime(target / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns))
    code, out, err = specir_cli("check", build, "--prompts", write_prompts(tmp_path, 4, 259, seed=8),
                                "--max-new-tokens", 12, "--json", "--limit", 0)
    assert code == 0 and json.loads(out)["mismatches"] == 0, err
    assert "load time" not in err


def test_reference_kernel_matches_linear_reference():
    from specir.backends.reference.ops import packed_linear
    from specir.bf12 import linear_reference, pack
    w = (torch.randn(96, 300) * 0.05).to(torch.bfloat16)
    w[3, 5] = float("inf")
    packed, bias = pack(w), torch.randn(96).to(torch.bfloat16)
    params = {"weight": packed, "bias": bias}
    for dtype in (torch.bfloat16, torch.float32, torch.bfloat16):
        x = torch.randn(2, 3, 300).to(dtype)
        b = bias.to(dtype)
        params["bias"] = b
        assert torch.equal(packed_linear(params, None, x), linear_reference(x, packed, b))
        assert torch.equal(packed_linear(params, None, x), torch.nn.functional.linear(x, w.to(dtype), b))
