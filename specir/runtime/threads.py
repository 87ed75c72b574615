"""CPU threads for decoding: small models decode faster on one thread (intra-op parallelism on
tiny matrices costs more in synchronisation than it saves, badly so on a busy machine)."""
from __future__ import annotations

import os

import torch

SMALL_MODEL_BYTES = 64 * 2**20


def choose_threads(weight_bytes: int) -> int:
    """SPECIR_THREADS overrides; otherwise 1 thread for models under 64 MB, torch's default above."""
    forced = os.environ.get("SPECIR_THREADS")
    if forced:
        return max(1, int(forced))
    return 1 if weight_bytes < SMALL_MODEL_BYTES else torch.get_num_threads()


def apply_threads(weights: dict) -> None:
    total = sum(t.numel() * t.element_size() for w in weights.values() for t in w.values()
                if isinstance(t, torch.Tensor))
    torch.set_num_threads(choose_threads(total))
