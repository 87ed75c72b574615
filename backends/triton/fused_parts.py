"""Which fused parts of a linear launch a forward runs as launches of their own, by row count.

A linear launch may carry a prologue (`swiglu` or `rms_norm`, in `prologue_value`) and an epilogue (`add`,
the linear's own value in `epilogue_value`; or `rope_kv_write`) (program.py). A forward of `rows` rows runs
apart (forward.py binds them, launch_configs.py lists them; the bits are the fused launch's):
- the prologue and the add epilogue, whatever their kind, where the linear runs cuBLAS at this width
  (gemm_route.uses_cublas) or through torch: neither takes a prologue or an epilogue;
- norm_linear's parts, the `rms_norm` prologue and the `add` epilogue, where the forward has more than
  NORM_LINEAR_MAX_ROWS rows (the Triton GEMM): measured on an H100 (session 25,
  bench/results/gpu-2026-12-07-session25), the GEMM's norm prologue added about 17 us to each launch
  (the drafter's 8-row levels: draft 3.71 ms folded against 2.14 ms apart), where the GEMV's (one row)
  makes the AR step faster. The cause, read from sm_90 builds afterwards (compile_check): the prologue's
  unrolled sum of squares took the GEMM to 255 registers; rolled (kernels/_rms.py ROLLED) it takes 90-96,
  not yet timed, so the rule stands until a GPU says otherwise. The swiglu prologue stays in the GEMM;
- not the rope + KV write epilogue: rope_kv_epilogue.py decides that (RopeKV.why_not_fused, listed_in_gemv).
"""
from __future__ import annotations

from .gemm_route import uses_cublas

NORM_LINEAR_MAX_ROWS = 1  # norm_linear's prologue and epilogue fold into GEMVs only


def parts_apart(program, launch, rows: int, on_torch: bool = False) -> list[str]:
    """The attribute names (`prologue_value`, `epilogue_value`) of `launch`'s fused parts that a forward of
    `rows` rows runs as launches of their own; `on_torch`: the linear's weights run through torch."""
    a = launch.attrs
    if launch.kind not in ("linear", "packed_linear") or not ({"prologue", "epilogue"} & set(a)):
        return []
    if on_torch or uses_cublas(program, launch, rows):
        return [key for key in ("prologue_value", "epilogue_value") if key in a]
    if rows <= NORM_LINEAR_MAX_ROWS:
        return []
    return ((["prologue_value"] if a.get("prologue") == "rms_norm" else [])
            + (["epilogue_value"] if a.get("epilogue") == "add" else []))
