"""Where the shipped zoo models live inside the package."""
from __future__ import annotations

from pathlib import Path

from ..errors import SpecirError

MODELS = Path(__file__).with_name("models")


def zoo_model_dir(name: str) -> Path:
    folder = MODELS / name
    if not (folder / "config.json").is_file():
        known = sorted(p.name for p in MODELS.glob("*") if (p / "config.json").is_file()) if MODELS.is_dir() else []
        raise SpecirError(f"no zoo model named {name!r}", path=str(folder),
                          hint="shipped models: " + (", ".join(known) or "none yet (run specir zoo train)"))
    return folder
