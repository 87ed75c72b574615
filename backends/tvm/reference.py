"""Plain-torch twins of the TVM CPU kernels: the numerics each kernel must reproduce.

They follow docs/KERNEL_CONTRACTS.md with the same rounding orders as the Triton backend's
references (HF Llama order for bf16 activations), so either backend can stand in for the other.
Written for clarity, not speed; the tests and the benchmark compare the kernels against them.
"""

from __future__ import annotations

import torch


def linear_reference(x, w, bias=None):
    """x @ w^T (+ bias) in fp32 from the same (bf16 or fp32) weights, rounded once to x.dtype."""
    y = x.float() @ w.float().T
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def rms_norm_reference(x, w, eps, residual=None):
    """HF order: x in fp32, normalise, round to x.dtype, multiply by w, round. With `residual`,
    normalises h = (x + residual).to(x.dtype) and returns (y, h)."""
    h = x if residual is None else (x.float() + residual.float()).to(x.dtype)
    hf = h.float()
    normed = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    y = (w.float() * normed.float()).to(x.dtype)
    return y if residual is None else (y, h)


def rotary_reference(q, k, pos, inv_freq, attention_scaling=1.0):
    """Rotate q [..., H, D] and k [..., KH, D] at positions pos [...] (rotate_half convention).
    Angles pos * inv_freq and cos/sin in fp32 (times attention_scaling), rounded to q.dtype;
    out = q*cos + rotate_half(q)*sin with each product and the sum rounded to q.dtype (HF)."""
    freqs = pos.reshape(-1).float()[:, None] * inv_freq.float()[None, :]
    cos = (freqs.cos() * attention_scaling).to(q.dtype).float()
    sin = (freqs.sin() * attention_scaling).to(q.dtype).float()

    def rotate(x):
        dtype, half = x.dtype, x.shape[-1] // 2
        xf = x.reshape(-1, x.shape[-2], x.shape[-1]).float()
        x1, x2 = xf[..., :half], xf[..., half:]
        c, s = cos[:, None, :], sin[:, None, :]

        def rnd(t):
            return t.to(dtype).float()

        lo = rnd(rnd(x1 * c) - rnd(x2 * s))
        hi = rnd(rnd(x2 * c) + rnd(x1 * s))
        return torch.cat([lo, hi], dim=-1).to(dtype).reshape(x.shape)

    return rotate(q), rotate(k)


def silu_mul_reference(gate, up=None):
    """silu(gate) in fp32 rounded to the dtype, times up in fp32, rounded (HF order).
    With one argument, its last dim holds [gate | up]."""
    if up is None:
        half = gate.shape[-1] // 2
        gate, up = gate[..., :half], gate[..., half:]
    act = torch.nn.functional.silu(gate.float()).to(gate.dtype)
    return (act.float() * up.float()).to(gate.dtype)


def attention_reference(q, k_cache, v_cache, lens, tree_mask=None, scale=None):
    """q [B, T, H, D]; caches [slots, KH, S, D] already holding the T new tokens at lens[b] + u.
    Query t of request b sees cache positions < lens[b] and new position lens[b] + u when
    tree_mask[b, t, u] (u <= t without a mask; u == t always). GQA: head h reads kv head
    h // (H // KH). fp32 scores (dot, then * scale), softmax and P @ V; output in q.dtype."""
    B, T, H, D = q.shape
    KH = k_cache.shape[1]
    scale = D ** -0.5 if scale is None else scale
    out = torch.empty_like(q)
    for b in range(B):
        L = int(lens[b])
        keys = k_cache[b, :, : L + T].float().repeat_interleave(H // KH, dim=0)  # [H, L+T, D]
        vals = v_cache[b, :, : L + T].float().repeat_interleave(H // KH, dim=0)
        new_ok = torch.ones(T, T, dtype=torch.bool).tril() if tree_mask is None else tree_mask[b].bool().clone()
        new_ok |= torch.eye(T, dtype=torch.bool)
        allowed = torch.cat([torch.ones(T, L, dtype=torch.bool), new_ok], dim=1)  # [T, L+T]
        scores = torch.einsum("thd,hsd->hts", q[b].float(), keys) * scale
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        out[b] = torch.einsum("hts,hsd->thd", scores.softmax(dim=-1), vals).to(q.dtype)
    return out


def kv_write_reference(k_cache, v_cache, k_new, v_new, lens):
    """In place: k/v of new token t of request b ([B, T, KH, D]) go to slot lens[b] + t."""
    for b in range(k_new.shape[0]):
        L = int(lens[b])
        k_cache[b, :, L: L + k_new.shape[1]] = k_new[b].transpose(0, 1)
        v_cache[b, :, L: L + v_new.shape[1]] = v_new[b].transpose(0, 1)


def kv_compact_reference(k_cache, v_cache, lens, acc_idx, n_acc):
    """In place: slot lens[b] + acc_idx[b, j] -> slot lens[b] + j for j < n_acc[b];
    returns lens + n_acc (`lens` itself is not changed)."""
    for b in range(lens.shape[0]):
        base = int(lens[b])
        for j in range(int(n_acc[b])):
            src = base + int(acc_idx[b, j])
            k_cache[b, :, base + j] = k_cache[b, :, src]
            v_cache[b, :, base + j] = v_cache[b, :, src]
    return lens + n_acc.to(lens.dtype)
