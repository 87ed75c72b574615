"""bench/cost_model_check.py's shape-only checkpoint: a sparse safetensors file whose header holds
the shape's tensors, which the Llama importer reads as that shape (no weight data is written)."""
from __future__ import annotations

from pathlib import Path

from tests.helpers.bench_scripts import load_bench_script


def test_shape_checkpoint_imports_at_its_shape(tmp_path):
    from specir.importers.checkpoint import tensor_index
    from specir.zoo.paths import zoo_model_dir
    from specir.zoo.shapes import SHAPES
    mod = load_bench_script("cost_model_check")
    out = tmp_path / "drafter"
    mod.shape_checkpoint("llama-1b-width-3l", Path(zoo_model_dir("code-drafter")), out)
    shape = SHAPES["llama-1b-width-3l"]
    index = tensor_index(out)
    assert tuple(index["model.layers.2.mlp.down_proj.weight"].shape) == (shape.hidden_size, shape.intermediate_size)
    assert "model.layers.3.mlp.down_proj.weight" not in index and "lm_head.weight" not in index  # 3 layers, tied
    assert (out / "model.safetensors").stat().st_blocks * 512 < 1 << 20  # holes, not 1.4 GB of data
