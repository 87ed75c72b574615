"""Writes ckpt/model.safetensors, the tiny checkpoint the pack-weights golden cases read.

    python tests/golden/pack-weights/make_checkpoint.py

Deterministic (seeded). Matrices and what pack-weights decides for them (defaults):
emb [64, 128] (embedding; a tied lm_head reads it) kept, up [64, 128] Gaussian packed,
down [128, 64] 40% zeros kept, narrow [64, 128] Gaussian packed, spread [128, 64] random bit
patterns (most rows raw) kept, tiny [32, 128] and tiny_back [128, 32] too small, head [64, 128]
Gaussian packed, n [128] a norm weight.
"""
from pathlib import Path

import torch
from safetensors.torch import save_file

torch.manual_seed(0)


def gaussian(*shape):
    return (torch.randn(*shape) * 0.05).to(torch.bfloat16)


down = gaussian(128, 64)
down[torch.rand(128, 64) < 0.4] = 0
tensors = {
    "emb": gaussian(64, 128),
    "up": gaussian(64, 128),
    "down": down,
    "narrow": gaussian(64, 128),
    "spread": torch.randint(-32768, 32768, (128, 64), dtype=torch.int32).to(torch.int16).view(torch.bfloat16),
    "tiny": gaussian(32, 128),
    "tiny_back": gaussian(128, 32),
    "head": gaussian(64, 128),
    "n": torch.ones(128, dtype=torch.bfloat16),
}
folder = Path(__file__).with_name("ckpt")
folder.mkdir(exist_ok=True)
save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"))
print(f"wrote {folder / 'model.safetensors'}")
