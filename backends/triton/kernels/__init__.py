"""Triton kernels for everything but linear layers (see docs/KERNEL_CONTRACTS.md).

One kernel family per module; each public wrapper takes torch tensors and has a plain-torch
twin in :mod:`specir.backends.triton.kernels.reference` that the tests compare against.
Importing this package is cheap; it only patches Triton's CPU interpreter when
``TRITON_INTERPRET=1`` (see ``_interpreter_compat``).
"""

from ._interpreter_compat import install as _install_interpreter_compat

_install_interpreter_compat()
