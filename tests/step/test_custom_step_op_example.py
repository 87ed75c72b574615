"""The README's custom step op (examples/custom_step_op.py): a plugin op that declares its
interfaces runs on the Triton backend's device step (under TRITON_INTERPRET=1 on a CPU: an h200 build
without a GPU), is captured with the verify in one device segment, and passes `specir check`."""
from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.specs import write_spec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_step_op.py"


def test_the_plugin_op_prints_compiles_for_the_gpu_and_passes_check(tmp_path, specir_cli, monkeypatch):
    from tests.triton_backend.conftest import VOCAB
    from tests.helpers.checkpoints import make_checkpoint, write_tokenizer
    import torch
    if not torch.cuda.is_available():  # on a GPU the kernels compile; a process cannot mix both modes
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    target = make_checkpoint("llama", tmp_path / "target", seed=11, num_hidden_layers=1, vocab_size=VOCAB,
                             intermediate_size=96, initializer_range=0.3)
    write_tokenizer(target, VOCAB)
    spec = write_spec(tmp_path, "p", target, "ngram", k=2, dtype="f32")
    code, out, err = specir_cli("opt", spec, "--plugin", EXAMPLE, "-p", "repeat-draft{k=3}")
    assert code == 0, err
    assert "draft.repeat %ctx {k = 3} : tokens" in out and "draft.ngram" not in out

    build = tmp_path / "build"
    code, _, err = specir_cli("compile", spec, "--plugin", EXAMPLE, "-p", "repeat-draft{k=3}", "--target", "h200",
                              "-o", build)
    assert code == 0, err
    manifest = json.loads((build / "manifest.json").read_text())
    assert manifest["backend"] == "triton" and any(Path(p).name == EXAMPLE.name for p in manifest["plugins"])

    from specir.pass_infra import load_plugin
    from specir.runtime.session import open_session
    load_plugin(str(EXAMPLE))
    session = open_session(str(build))
    engine = session.engine()
    assert session.backend == "triton"
    assert [seg["host"] for seg in engine.program.describe()] == [False]  # one device segment: no host op
    prompt = [7, 7, 7, 7, 3, 3, 3, 3, 3]
    result = engine.generate([prompt], 6)[0]
    assert len(result.tokens) == 6

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt_ids": prompt}) + "\n" + json.dumps({"prompt_ids": [1, 2, 3]}) + "\n")
    code, out, err = specir_cli("check", build, "--prompts", prompts, "--max-new-tokens", 6, "--batch-size", 2)
    assert code == 0, err + out
    assert "0 mismatches" in out + err
