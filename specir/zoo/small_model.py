"""Reading a small Llama checkpoint folder (config + safetensors) for inflation and checks."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from specir.errors import SpecirError


def load_small_model(folder: Path):
    """(LlamaConfig, {tensor name: tensor}) of a Hugging Face Llama folder, one file or sharded."""
    from safetensors.torch import load_file
    from transformers import AutoConfig

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise SpecirError(f"{folder} is not a model folder (no config.json)", path=str(folder),
                          hint="give a folder written by `specir zoo train` or save_pretrained")
    try:
        cfg = AutoConfig.from_pretrained(str(folder))
    except (OSError, ValueError) as exc:
        raise SpecirError(f"cannot read {folder / 'config.json'}: {exc}", path=str(folder),
                          hint="give a Hugging Face model folder") from None
    if cfg.model_type != "llama":
        raise SpecirError(f"model type '{cfg.model_type}' is not supported by inflation",
                          path=str(folder), hint="inflation handles Llama-architecture models")
    index = folder / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").exists():
        files = ["model.safetensors"]
    else:
        raise SpecirError(f"{folder} has no safetensors weights", path=str(folder),
                          hint="save it with save_pretrained (safetensors)")
    weights: dict[str, torch.Tensor] = {}
    for name in files:
        try:
            weights.update(load_file(str(folder / name)))
        except Exception as exc:  # safetensors raises several types for corrupt files
            raise SpecirError(f"cannot read {folder / name}: {exc}", path=str(folder / name),
                              hint="the file is missing or corrupt; re-create it") from None
    return cfg, weights
