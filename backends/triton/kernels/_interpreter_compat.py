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

Every interpreted op built a new ``tl.block_type`` for its result, and with it a ``tl.tuple`` of the shape
and that tuple's type and name string, and every new tensor a second tuple of the same shape (together about
a third of an interpreted kernel's time). Those tuples are now made once per shape (`_shape_tuples`); they
are never modified, so sharing them changes nothing.

Within a launch, a ``@triton.jit`` helper's call no longer patches ``triton.language`` again (a sixth of
an interpreted kernel's time): the launch patched the same modules with the same builtins already
(`_patch_lang_once_per_launch`).

Conversions between bf16 and fp32 without rounding (`.to()`: an exact widening, or the interpreter's
truncating narrowing) are bit shifts (`_fast_convert_float`) where no input is subnormal; subnormal inputs
take the interpreter's own path, so every converted bit is what it was.

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
    _shape_tuples(interpreter)
    _patch_lang_once_per_launch(interpreter)
    interpreter._convert_float = _fast_convert_float(interpreter._convert_float)
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


def _shape_tuples(interpreter):
    """`tl.block_type` and `tl.tensor` construction with their shape tuples made once per shape: each builds a
    `tl.tuple` (and that tuple's type and name string) of its shape, anew for every interpreted op. The
    tuples are never modified (a new shape is a new tuple), so one per shape serves every type and tensor."""
    from triton._utils import validate_block_shape
    from triton.language import core

    block_shapes: dict = {}   # dims -> (tl.tuple of ints, numel, "['d0', 'd1']")
    tensor_shapes: dict = {}  # dims -> (constexpr numel, tl.tuple of constexprs)
    block_types: dict = {}    # (element type's key, dims) -> tl.block_type

    def dims_of(shape) -> tuple:
        """A shape (list, tuple or tl.tuple of ints or constexprs) as a tuple of ints, as _unwrap_shape reads it."""
        values = shape.values if isinstance(shape, core.tuple) else shape
        return tuple(v.value if isinstance(v, core.constexpr) else v for v in values)

    def block_type_init(self, element_ty, shape):
        self.element_ty = element_ty
        assert isinstance(shape, (list, tuple, core.tuple))
        dims = dims_of(shape)
        found = block_shapes.get(dims)
        if found is None:
            if not dims:
                raise TypeError("0d block_type is forbidden")
            shape_tuple = core.tuple(list(dims))
            found = block_shapes[dims] = (shape_tuple, validate_block_shape(dims), str(shape_tuple))
        self.shape, self.numel, shape_name = found
        self.name = f"<{shape_name}, {element_ty}>"

    def tensor_init(self, handle, type):
        core.base_value.__init__(self)
        self.handle = handle
        self.type = type
        self.dtype = type.scalar
        dims = tuple(type.shape.values) if type.is_block() else ()
        found = tensor_shapes.get(dims)
        if found is None:
            found = tensor_shapes[dims] = (core.constexpr(math.prod(dims)),
                                           core.tuple([core.constexpr(d) for d in dims]))
        self.numel, self.shape = found

    def block_type_of(element_ty, shape):
        """One block type per (element type, shape) for the builder and `with_element_ty`. Pointer types define
        equality but no hash: their name (their element type and constness) and address space stand in."""
        key = (type(element_ty), element_ty.name, getattr(element_ty, "address_space", None), dims_of(shape))
        found = block_types.get(key)
        if found is None:
            found = block_types[key] = core.block_type(element_ty, shape)
        return found

    original_tuple_eq = core.tuple.__eq__

    def tuple_eq(self, other):
        """tl.tuple == a list of ints (the broadcast's shape test, every binary op): compared as they are, which
        is what the original does after wrapping the list in a new tl.tuple."""
        if type(other) is list and all(type(v) is int for v in other):
            return core.constexpr(self.values == other)
        return original_tuple_eq(self, other)

    import math
    core.tuple.__eq__ = tuple_eq  # assigned after the class exists: its __hash__ stays
    core.block_type.__init__ = block_type_init
    core.block_type.with_element_ty = lambda self, scalar_ty: block_type_of(scalar_ty, self.shape)
    core.tensor.__init__ = tensor_init
    interpreter.InterpreterBuilder.get_block_ty = lambda self, dtype, shape: block_type_of(dtype, shape)


def _patch_lang_once_per_launch(interpreter):
    """`_patch_lang(fn)` (patch the language modules fn's globals hold for interpreted execution) done by the
    launch (GridExecutor), and skipped by a device function's call inside it where the launch has patched
    those modules already (the original re-patched them with equal builtins at every call)."""
    import inspect

    import triton.language as tl

    original_patch_lang = interpreter._patch_lang
    original_launch = interpreter.GridExecutor.__call__
    langs_of: dict = {}            # id(module globals) -> (globals, ids of the language modules they hold)
    patched: list = [None]         # ids of the modules the running launch has patched (None: no launch)

    def _patch_lang(fn):
        g = fn.__globals__
        found = langs_of.get(id(g))
        if found is None:
            found = langs_of[id(g)] = (g, frozenset(id(v) for v in g.values()
                                                    if inspect.ismodule(v) and v in (tl, tl.core)))
        langs = found[1]
        if patched[0] is not None and langs <= patched[0]:
            return interpreter._LangPatchScope()  # nothing to undo
        scope = original_patch_lang(fn)
        if patched[0] is not None:
            patched[0] |= langs
        return scope

    def launch(self, *args, **kwargs):
        outer, patched[0] = patched[0], set()
        try:
            return original_launch(self, *args, **kwargs)
        finally:
            patched[0] = outer

    interpreter._patch_lang = _patch_lang
    interpreter.GridExecutor.__call__ = launch


def _fast_convert_float(original):
    """The interpreter's `_convert_float(input, input_dtype, output_dtype, rounding_mode)` with bf16 -> fp32 as
    `bits << 16` and fp32 -> bf16 without a rounding mode as `bits >> 16`: the values the original computes
    for every input but subnormals (zeros, normals, infinities and NaNs keep their sign, exponent and
    leading mantissa bits), which go to the original."""
    import numpy as np
    import triton.language as tl

    def _convert_float(input, input_dtype, output_dtype, rounding_mode):
        if input_dtype == tl.bfloat16 and output_dtype == tl.float32:
            bits = np.ascontiguousarray(input).view(np.uint16)
            if not np.any(((bits & 0x7F80) == 0) & ((bits & 0x007F) != 0)):
                return bits.astype(np.uint32) << np.uint32(16)
        elif input_dtype == tl.float32 and output_dtype == tl.bfloat16 and rounding_mode is None:
            bits = np.ascontiguousarray(input).view(np.uint32)
            if not np.any(((bits & 0x7F800000) == 0) & ((bits & 0x007FFFFF) != 0)):
                return (bits >> np.uint32(16)).astype(np.uint16)
        return original(input, input_dtype, output_dtype, rounding_mode)

    _convert_float.original = original
    return _convert_float


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
