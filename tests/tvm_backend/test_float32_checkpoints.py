"""Float32 (and float16) checkpoints on the CPU main path: `specir init` + `run` + `check`.

transformers saves a model made from a config in float32, and safetensors lays its tensors out
at whatever offset the header leaves, so memory-mapped weights are not 64-byte aligned; the TVM
kernels assume they are (backends/tvm/alignment.py). These ran into a SIGSEGV in rms_norm."""
from __future__ import annotations

import json

import pytest
import torch

from tests.helpers.checkpoints import make_checkpoint


def _misaligned_tensors(folder) -> int:
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        return sum(f.get_tensor(name).data_ptr() % 64 != 0 for name in f.keys())


@pytest.mark.parametrize("hidden, head_dim", [(64, 16), (128, 32), (256, 64)])
def test_float32_checkpoint_runs_and_checks(tmp_path, specir_cli, hidden, head_dim):
    heads = hidden // head_dim
    folder = make_checkpoint("llama", tmp_path / "M", dtype=torch.float32, hidden_size=hidden, head_dim=head_dim,
                             num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                             intermediate_size=2 * hidden, vocab_size=1000, initializer_range=0.02)
    assert _misaligned_tensors(folder) > 0  # what made the kernels fault
    code, spec_text, err = specir_cli("init", "--target-model", folder, "--drafter", "ngram")
    assert code == 0, err
    spec = tmp_path / "p.spec"
    spec.write_text(spec_text)
    assert 'dtype = "f32"' in spec_text
    code, out, err = specir_cli("run", spec, "--prompt-ids", "3,14,15,92", "--max-new-tokens", 6, "--json")
    assert code == 0, err
    assert len(json.loads(out)["tokens"]) == 6
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [3, 14, 15, 92]}\n')
    code, out, err = specir_cli("check", spec, "--prompts", prompts, "--max-new-tokens", 6)
    assert code == 0 and "PASS" in out + err, out + err


def test_float16_checkpoint_runs_on_the_reference_kernels_and_says_so(tmp_path, specir_cli):
    folder = make_checkpoint("llama", tmp_path / "M16", dtype=torch.float16)
    code, spec_text, err = specir_cli("init", "--target-model", folder, "--drafter", "ngram")
    spec = tmp_path / "p.spec"
    spec.write_text(spec_text)
    code, out, err = specir_cli("run", spec, "--prompt-ids", "3,14,15", "--max-new-tokens", 4, "--json")
    assert code == 0, err
    assert [line for line in err.splitlines() if line.startswith("note:") and "f16" in line] == \
        ["note: activations in f16 have no TVM kernels; those models run the reference kernels (in f16, as the IR says)"]
