"""Host-side facts about the device that launch heuristics use (cached, no synchronisation)."""

from __future__ import annotations

import torch

_sm_counts: dict[int, int] = {}


def sm_count(device: torch.device | str) -> int:
    """Streaming multiprocessors of a CUDA device; 4 for the CPU interpreter."""
    device = torch.device(device)
    if device.type != "cuda":
        return 4
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _sm_counts:
        _sm_counts[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _sm_counts[index]
