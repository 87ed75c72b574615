"""PTX of the kernels a lowering launches, for the target's architecture (no GPU needed).

Contract: `emit_ptx(programs, target, folder) -> ({kernel module.function: [paths]}, note)`.
Not implemented yet: returns nothing and a note (compile_check.py builds every kernel for sm_90
at the Llama-3.1-8B shapes; `python -m specir.backends.triton.kernels.compile_check`).
"""
from __future__ import annotations


def emit_ptx(programs, target, folder):
    return {}, ("PTX not emitted (the runtime JIT-compiles each kernel for the GPU it runs on; "
                "`python -m specir.backends.triton.kernels.compile_check --arch 90` builds them offline)")
