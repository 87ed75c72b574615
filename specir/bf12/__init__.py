"""BF12: a lossless 12-bit storage format for bf16 weight matrices (docs/BF12.md).

pack / unpack (torch), safetensors serialization, statistics (bits per weight), the
"does it pay" decision for the pack-weights pass, and the reference-backend linear.
"""
from .decision import PackDecision, decide
from .layout import GROUP
from .matrix import BF12Matrix
from .pack import pack
from .reference import linear_reference
from .serialize import from_tensors, load, save, to_tensors
from .stats import MatrixStats, analyze, bits_per_weight, format_report, gaussian_report, safetensors_report
from .unpack import unpack

__all__ = [
    "BF12Matrix", "GROUP", "MatrixStats", "PackDecision", "analyze", "bits_per_weight", "decide",
    "format_report", "from_tensors", "gaussian_report", "linear_reference", "load", "pack",
    "safetensors_report", "save", "to_tensors", "unpack",
]
