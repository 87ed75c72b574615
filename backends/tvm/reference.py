"""The TVM kernels' torch twins: the shared contract references (specir.kernel_reference) in the
call shapes of the TVM wrappers (fused residual argument, any leading dims for rotary)."""
from __future__ import annotations

from specir.kernel_reference import (add_rms_norm_reference, attention_reference, kv_compact_reference,  # noqa: F401
                                     kv_write_reference, linear_reference, rope_reference,
                                     silu_mul_reference)
from specir.kernel_reference import rms_norm_reference as _rms_norm


def rms_norm_reference(x, w, eps, residual=None):
    """rms_norm(x); with `residual`, normalises h = (x + residual) and returns (y, h)."""
    if residual is None:
        return _rms_norm(x, w, eps)
    return add_rms_norm_reference(x, residual, w, eps)


def rotary_reference(q, k, pos, inv_freq, attention_scaling=1.0):
    """rope_reference over q [..., H, D] and k [..., KH, D] at positions pos [...]."""
    rq, rk = rope_reference(q.reshape(-1, *q.shape[-2:]), k.reshape(-1, *k.shape[-2:]), pos.reshape(-1),
                            inv_freq, attention_scaling)
    return rq.reshape(q.shape), rk.reshape(k.shape)
