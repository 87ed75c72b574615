"""IR dtype names <-> torch dtypes."""
from __future__ import annotations

import torch

from ..errors import SpecirError

TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def torch_dtype(name: str) -> torch.dtype:
    if name not in TORCH_DTYPES:
        raise SpecirError(f"unsupported activation dtype {name!r}", hint="use bf16, f16 or f32")
    return TORCH_DTYPES[name]


def dtype_bytes(model) -> int:
    """Bytes of one activation element of a model region (its `dtype` attribute, bf16 by default)."""
    return torch_dtype(str(model.attrs.get("dtype", "bf16"))).itemsize
