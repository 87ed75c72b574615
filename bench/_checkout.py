"""Let a bench script run from a plain checkout (no `pip install -e .`): `specir.backends` maps to
the top-level `backends/` folder only through pyproject's package-dir, which an install sets up.
Import this module first (the script's own folder is on sys.path when run as a script)."""
import os
import sys


def make_specir_importable() -> None:
    try:
        import specir.backends.triton.kernels  # noqa: F401
        return
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    import specir
    specir.__path__.append(root)


make_specir_importable()
