"""Giving device memory back between jobs of one long-lived process.

Contract: `release()` collects garbage (an engine's sessions refer back to it, so its tensors
are freed only by the cycle collector) and, where CUDA is initialised, empties torch's caching
allocator, so another process on the same GPU (the guard's child, the next candidate's timer)
can allocate what this one no longer uses. Cheap when there is nothing to free.
"""
from __future__ import annotations

import gc
import sys


def release() -> None:
    gc.collect()
    torch = sys.modules.get("torch")  # never import torch just to release nothing
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
