"""The model zoo: the shipped small target/drafter pair, its corpus, workloads and inflation.

`default_pair()` gives the folders of the shipped pair (Hugging Face format, shared tokenizer);
see docs/ZOO.md for how they were built and the model card.
"""
from __future__ import annotations

from pathlib import Path

from specir.zoo.paths import MODELS, zoo_model_dir

TARGET_NAME = "code-target"
DRAFTER_NAME = "code-drafter"


def default_pair() -> tuple[Path, Path]:
    """(target_dir, drafter_dir) of the shipped pair; a SpecirError if it is not installed."""
    return zoo_model_dir(TARGET_NAME), zoo_model_dir(DRAFTER_NAME)


__all__ = ["MODELS", "default_pair", "zoo_model_dir", "TARGET_NAME", "DRAFTER_NAME"]
