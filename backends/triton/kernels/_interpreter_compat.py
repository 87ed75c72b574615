"""Make Triton 3.6's interpreter (TRITON_INTERPRET=1) work with NumPy >= 2.4.

The interpreter keeps every scalar (program ids, kernel int arguments, scalar loads) as a
one-element 1-D array and converts it to a Python int with ``int(array)`` when a scalar is used
as a ``range`` bound. NumPy 2.4 made ``int()`` of an array with ``ndim > 0`` a TypeError, so any
kernel loop with a runtime bound fails under the interpreter. ``install()`` re-registers the
``__index__`` hook to read the single element explicitly. It changes nothing on a GPU (compiled
kernels never reach the interpreter) and is idempotent.
"""

from __future__ import annotations

import os

_installed = False


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def install() -> None:
    global _installed
    if _installed or not interpreting():
        return
    try:
        from triton.runtime import interpreter
    except ImportError:  # no triton: nothing to patch
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:
        return

    def _patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = _patch_lang_tensor
    _installed = True
