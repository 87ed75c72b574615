"""Where the shipped zoo models live inside the package."""
from __future__ import annotations

import difflib
from pathlib import Path

from ..errors import SpecirError

MODELS = Path(__file__).with_name("models")


def zoo_model_dir(name: str, where=None) -> Path:
    """The shipped model `name`'s folder; `where` (a SourceLocation) places the error at the import."""
    folder = MODELS / name
    if not (folder / "config.json").is_file():
        known = sorted(p.name for p in MODELS.glob("*") if (p / "config.json").is_file()) if MODELS.is_dir() else []
        close = difflib.get_close_matches(name, known, n=1)
        raise SpecirError(f"no zoo model named {name!r}", path=str(folder), location=where,
                          hint=(f"did you mean 'zoo:{close[0]}'? " if close else "") + "shipped models: " + (", ".join(known) or "none yet (run specir zoo train)"))
    return folder
