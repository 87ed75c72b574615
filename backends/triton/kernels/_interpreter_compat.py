"""Triton 3.6's interpreter (TRITON_INTERPRET=1) made to work with NumPy >= 2.4, and made faster.

The interpreter keeps every scalar (program ids, kernel int arguments, scalar loads) as a
one-element 1-D array and converts it to a Python int with ``int(array)`` when a scalar is used
as a ``range`` bound. NumPy 2.4 made ``int()`` of an array with ``ndim > 0`` a TypeError, so any
kernel loop with a runtime bound fails under the interpreter. ``install()`` re-registers the
``__index__`` hook to read the single element explicitly.

It also lists each language module's builtins once: the interpreter re-patches ``triton.language``
for every launch and every call of a ``@triton.jit`` helper inside a kernel, and found the builtins with
``inspect.getmembers`` each time, about a sixth of a Triton pipeline test's time. What is patched is the
same (the builtins not patched already), so no result changes.

And it turns off the interpreter's integer-overflow assertion on every add, sub and mul (a sixth of a
pipeline test's time): a GPU compiles that assertion only in debug builds, so kernels run here as they
run there. Test shapes are far too small for index arithmetic to overflow.

``_get_np_dtype``, which rebuilt a 19-entry dtype table on every call (a few percent of a kernel's
interpreted time), answers from a table kept across calls.

Nothing here runs on a GPU (compiled kernels never reach the interpreter); ``install()`` is idempotent.
"""

from __future__ import annotations

import dataclasses
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
    interpreter._patch_builtin = _cached_patch_builtin(interpreter)
    interpreter._get_np_dtype = _cached_np_dtype(interpreter._get_np_dtype)
    builder = interpreter.interpreter_builder
    builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
    _installed = True


def _cached_patch_builtin(interpreter):
    """The interpreter's `_patch_builtin` with each package's builtins listed on its first launch only."""
    import inspect

    from triton.language.core import is_builtin

    builtins: dict = {}

    def _patch_builtin(pkg, builder, scope):
        members = builtins.get(pkg)
        if members is None:  # the first launch, before anything is patched
            members = builtins[pkg] = [(name, m) for name, m in inspect.getmembers(pkg) if is_builtin(m)]
        for name, member in members:
            if getattr(pkg, name, None) is member:  # a device function's call finds its kernel's patch in place
                interpreter._patch_attr(pkg, name, member, builder, scope)

    return _patch_builtin


def _cached_np_dtype(original):
    """The interpreter's `_get_np_dtype` (a Triton dtype or block type -> its NumPy storage dtype), each scalar
    type's answer computed once by the original."""
    import numpy as np
    import triton.language as tl

    table: dict = {}

    def _get_np_dtype(tt_dtype):
        scalar = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        if isinstance(scalar, tl.pointer_type):
            return np.dtype(np.uint64)
        found = table.get(scalar)
        if found is None:
            found = table[scalar] = original(scalar)
        return found

    return _get_np_dtype
