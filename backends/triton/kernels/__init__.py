"""Triton kernels for everything but linear layers (see docs/KERNEL_CONTRACTS.md).

One kernel family per module; each public wrapper takes torch tensors and has a plain-torch
twin in :mod:`specir.kernel_reference` that the tests compare against:

- norm: rms_norm, add_rms_norm            - rope: rope, rope_kv_write (fused cache write)
- activation: silu_mul (SwiGLU)           - embedding: embedding
- kv_cache: kv_write, kv_compact          - attention: attention (decode + tree verify)
- accept: greedy_accept_tree              - argmax: argmax over the vocabulary
- linear (another owner): GEMV/GEMM       - compile_check: build every kernel for sm_90 offline

Wrappers take `out=` (and `workspace=` where scratch is needed) so a CUDA-graph-captured step
allocates nothing; launch grids depend on shapes only, never on device values.
Importing this package is cheap; it only patches Triton's CPU interpreter when
``TRITON_INTERPRET=1`` (see ``_interpreter_compat``).
"""

from ._interpreter_compat import install as _install_interpreter_compat

_install_interpreter_compat()
