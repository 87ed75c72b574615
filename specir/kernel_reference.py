"""The reference numerics: plain-torch twins of the kernel contracts (docs/KERNEL_CONTRACTS.md).

Each formula lives here once. The Triton and TVM kernel tests and benchmarks compare against
these functions; the reference backend's op kernels (backends/reference/ops.py) are adapters
that call them on the runtime's batched tensors, so the oracle that is checked against
transformers and the references the kernels are checked against are the same code. Where a
contract reads per request (KV writes, attention's masks, tree acceptance) the twin loops over
requests in Python, written for clarity, not speed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


# --- Linear ------------------------------------------------------------------------------------

def linear_reference(x, w, bias=None):
    """x @ w^T (+ bias) as HF's nn.Linear computes it: F.linear in x.dtype. Weights (and bias) of
    another dtype are cast to x.dtype first (exact for bf16 weights under fp32 activations)."""
    if w.dtype != x.dtype:
        w = w.to(x.dtype)
    if bias is not None and bias.dtype != x.dtype:
        bias = bias.to(x.dtype)
    return F.linear(x, w, bias)


# --- RMSNorm -----------------------------------------------------------------------------------

def rms_norm_reference(x: torch.Tensor, w: torch.Tensor, eps: float, group: int = 0) -> torch.Tensor:
    """HF Llama order: x in fp32, normalise, round to x.dtype, multiply by w, round to x.dtype
    (`w * normed` in the common dtype: one rounding of an exact product when w has x's dtype).
    With `group`, each run of `group` channels of the last dim is normalised on its own."""
    shape = x.shape
    if group:
        x = x.reshape(*shape[:-1], shape[-1] // group, group)
    xf = x.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (w * normed).to(x.dtype).reshape(shape)


def add_rms_norm_reference(x, residual, w, eps):
    """new_residual = x + residual (rounded to x.dtype); returns (rms_norm(new_residual), new_residual)."""
    new_residual = (x.float() + residual.float()).to(x.dtype)
    return rms_norm_reference(new_residual, w, eps), new_residual


# --- Rotary embedding --------------------------------------------------------------------------

def rope_cos_sin_reference(pos, inv_freq, dtype, attention_scaling: float = 1.0):
    """cos, sin [N, D/2] in `dtype`: fp32 angles pos * inv_freq, scaled, then rounded (HF)."""
    freqs = pos.reshape(-1).float()[:, None] * inv_freq.float()[None, :]
    return ((freqs.cos() * attention_scaling).to(dtype), (freqs.sin() * attention_scaling).to(dtype))


def rope_rotate_reference(x, cos, sin):
    """x*cos + rotate_half(x)*sin over the first R = 2 * cos.shape[-1] dims of x [..., D], HF
    rounding order: each product and the sum rounded to x.dtype (the products of x.dtype values
    are exact in fp32). cos/sin [..., R/2] (x.dtype) broadcast against x[..., :R/2]; dims R.. pass
    through."""
    half = cos.shape[-1]
    x1, x2 = x[..., :half].float(), x[..., half: 2 * half].float()
    c, s = cos.float(), sin.float()

    def rnd(t):
        return t.to(x.dtype).float()

    lo = rnd(rnd(x1 * c) + rnd(-x2 * s))
    hi = rnd(rnd(x2 * c) + rnd(x1 * s))
    return torch.cat([lo.to(x.dtype), hi.to(x.dtype), x[..., 2 * half:]], dim=-1)


def rope_reference(q, k, pos, inv_freq, attention_scaling: float = 1.0):
    """Rotate q [N, H, D] and k [N, KH, D] at positions pos [N] (rotate_half convention, HF
    rounding order, see rope_rotate_reference). Only the first R = 2 * len(inv_freq) dims rotate."""
    cos, sin = rope_cos_sin_reference(pos, inv_freq, q.dtype, attention_scaling)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return rope_rotate_reference(q, cos, sin), rope_rotate_reference(k, cos, sin)


# --- MLP activation and embedding --------------------------------------------------------------

def silu_mul_reference(gate_or_gate_up, up=None):
    """SwiGLU, HF order: silu(gate) in fp32 rounded to the dtype, times up, rounded.
    With one argument, its last dim holds [gate | up]."""
    if up is None:
        half = gate_or_gate_up.shape[-1] // 2
        gate, up = gate_or_gate_up[..., :half], gate_or_gate_up[..., half:]
    else:
        gate = gate_or_gate_up
    return (F.silu(gate) * up).to(gate.dtype)  # silu computes in fp32 and rounds once; the product too


def embedding_reference(ids, table):
    """Rows of `table` [V, hidden] for `ids` (any shape); ids outside [0, V) give zero rows."""
    flat = ids.reshape(-1).long()
    valid = (flat >= 0) & (flat < table.shape[0])
    out = table[flat.clamp(0, table.shape[0] - 1)] * valid[:, None].to(table.dtype)
    return out.reshape(*ids.shape, table.shape[1])


# --- KV cache ----------------------------------------------------------------------------------

def kv_write_reference(k_cache, v_cache, k_new, v_new, lens, n_new=None, slots=None, offsets=None):
    """In place: k/v of new token t of request b [B, T, KH, D] go to row lens[b] + offsets[b] + t
    of cache slot slots[b] (offsets default 0, slots default b; t < n_new[b] when given; rows
    >= max_seq are dropped)."""
    B, T = k_new.shape[:2]
    max_seq = k_cache.shape[2]
    for b in range(B):
        count = T if n_new is None else int(n_new[b])
        slot = b if slots is None else int(slots[b])
        start = int(lens[b]) + (0 if offsets is None else int(offsets[b]))
        for t in range(count):
            if start + t < max_seq:
                k_cache[slot, :, start + t] = k_new[b, t]
                v_cache[slot, :, start + t] = v_new[b, t]


def kv_compact_reference(k_cache, v_cache, lens, acc_idx, n_acc, slots=None):
    """In place: row lens[b] + acc_idx[b, j] -> row lens[b] + j for j < n_acc[b] in cache slot
    slots[b] (default b). Returns the new lens (lens + n_acc); `lens` itself is not changed."""
    for b in range(lens.shape[0]):
        base = int(lens[b])
        slot = b if slots is None else int(slots[b])
        for j in range(int(n_acc[b])):
            src = base + int(acc_idx[b, j])
            k_cache[slot, :, base + j] = k_cache[slot, :, src]
            v_cache[slot, :, base + j] = v_cache[slot, :, src]
    return lens + n_acc.to(lens.dtype)


# --- Attention ---------------------------------------------------------------------------------

def attend_reference(q, keys, values, visible, scale):
    """The attention core: q [B, H, T, D], keys/values [B, KH, S, D] (each kv head serves H/KH
    query heads), visible [B, T, S] bool. fp32 scores q.k * scale, -inf where not visible,
    softmax and P@V in fp32; returns [B, H, T, D] fp32 (the caller rounds once)."""
    group = q.shape[1] // keys.shape[1]
    keys = keys.float().repeat_interleave(group, dim=1)
    values = values.float().repeat_interleave(group, dim=1)
    scores = torch.matmul(q.float(), keys.transpose(-1, -2)) * scale  # [B, H, T, S]
    scores = scores.masked_fill(~visible[:, None, :, :], float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), values)


def attention_reference(q, k_cache, v_cache, lens, tree_mask=None, scale=None, slots=None, offsets=None,
                        pos=None, window=0):
    """q [B, T, H, D]; cache [slots, KH, S, D] already holding the T new tokens at rows
    lens[b] + offsets[b] + t of slot slots[b] (offsets default 0, slots default b). Query t sees
    rows < lens[b] and row lens[b] + u (u < offsets[b] + T) where tree_mask[b, t, u] (u <=
    offsets[b] + t without a mask; u == offsets[b] + t always). With a sliding window (window > 0,
    pos [B, T] the queries' positions) a row r that holds position r (every committed row; without
    a tree mask every row) is seen only where pos[b, t] - r < window; a tree's new and scratch
    rows are taken to lie within the window (window > T). fp32 scores, softmax and P@V; output in
    q.dtype."""
    B, T, H, D = q.shape
    scale = D ** -0.5 if scale is None else scale
    out = torch.empty_like(q)
    for b in range(B):
        L = int(lens[b])
        off = 0 if offsets is None else int(offsets[b])
        slot = b if slots is None else int(slots[b])
        U = off + T
        own = torch.zeros(T, U, dtype=torch.bool)
        own[torch.arange(T), off + torch.arange(T)] = True
        if tree_mask is None:
            new_ok = torch.arange(U)[None, :] <= (off + torch.arange(T))[:, None]
        else:
            new_ok = tree_mask[b, :, :U].cpu().bool() | own
        allowed = torch.cat([torch.ones(T, L, dtype=torch.bool), new_ok], dim=1)   # [T, L+U]
        if window:
            in_window = (pos[b].cpu()[:, None] - torch.arange(L + U)[None, :]) < window
            allowed &= in_window if tree_mask is None else torch.cat([in_window[:, :L], torch.ones(T, U, dtype=torch.bool)], 1)
        allowed = allowed.to(q.device)
        o = attend_reference(q[b].transpose(0, 1)[None], k_cache[slot, :, : L + U][None],
                             v_cache[slot, :, : L + U][None], allowed[None], scale)  # [1, H, T, D]
        out[b] = o[0].transpose(0, 1).to(q.dtype)
    return out


# --- Greedy acceptance -------------------------------------------------------------------------

def greedy_accept_tree_reference(tokens, parents, target):
    """Contract's greedy tree acceptance, per request. Node t > 0 is accepted iff 0 <= parent < t,
    the parent is accepted and tokens[t] == target[parent]. Returns (acc_idx [B, T] int32 with
    -1 past n_acc, n_acc [B] int32, bonus [B] = target[last accepted node])."""
    B, T = tokens.shape
    acc_idx = torch.full((B, T), -1, dtype=torch.int32)
    n_acc = torch.zeros(B, dtype=torch.int32)
    bonus = torch.zeros(B, dtype=target.dtype)
    tok, par, tgt = tokens.cpu().tolist(), parents.cpu().tolist(), target.cpu().tolist()
    for b in range(B):
        accepted, depth = [True] + [False] * (T - 1), [0] * T
        for t in range(1, T):
            p = par[b][t]
            if 0 <= p < t and accepted[p] and tok[b][t] == tgt[b][p]:
                accepted[t], depth[t] = True, depth[p] + 1
        last = max((t for t in range(T) if accepted[t]), key=lambda t: (depth[t], -t))
        path = [last]
        while path[-1] != 0:
            path.append(par[b][path[-1]])
        path.reverse()
        acc_idx[b, : len(path)] = torch.tensor(path, dtype=torch.int32)
        n_acc[b] = len(path)
        bonus[b] = tgt[b][last]
    dev = tokens.device
    return acc_idx.to(dev), n_acc.to(dev), bonus.to(dev)


def argmax_reference(logits):
    """Index of the largest value of each row (first one on ties), int64."""
    return logits.float().argmax(dim=-1)
