"""Plain-torch twins of the backend kernels: the numerics every kernel must reproduce.

Each function follows docs/KERNEL_CONTRACTS.md and is written for clarity, not speed (Python
loops over requests are fine here). The Triton and TVM kernel tests and benchmarks compare
against these; backends/reference/ops.py is the runtime's (batched) twin of the same contracts.
"""

from __future__ import annotations

import torch


# --- Linear ------------------------------------------------------------------------------------

def linear_reference(x, w, bias=None):
    """x @ w^T (+ bias) in fp32 from the same (bf16 or fp32) weights, rounded once to x.dtype."""
    y = x.float() @ w.float().T
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


# --- RMSNorm -----------------------------------------------------------------------------------

def rms_norm_reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """HF Llama order: x in fp32, normalise, round to x.dtype, multiply by w, round to x.dtype."""
    xf = x.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (w.float() * normed.float()).to(x.dtype)


def add_rms_norm_reference(x, residual, w, eps):
    """new_residual = x + residual (rounded to x.dtype); returns (rms_norm(new_residual), new_residual)."""
    new_residual = (x.float() + residual.float()).to(x.dtype)
    return rms_norm_reference(new_residual, w, eps), new_residual


# --- Rotary embedding --------------------------------------------------------------------------

def rope_cos_sin_reference(pos, inv_freq, dtype, attention_scaling: float = 1.0):
    """cos, sin [N, D/2] in `dtype`: fp32 angles pos * inv_freq, scaled, then rounded (HF)."""
    freqs = pos.reshape(-1).float()[:, None] * inv_freq.float()[None, :]
    return ((freqs.cos() * attention_scaling).to(dtype), (freqs.sin() * attention_scaling).to(dtype))


def rope_reference(q, k, pos, inv_freq, attention_scaling: float = 1.0):
    """Rotate q [N, H, D] and k [N, KH, D] (rotate_half convention), HF rounding order:
    out = q*cos + rotate_half(q)*sin with each product and the sum rounded to q.dtype.
    Only the first R = 2 * len(inv_freq) dims rotate; dims R.. pass through."""
    cos, sin = rope_cos_sin_reference(pos, inv_freq, q.dtype, attention_scaling)
    half = inv_freq.numel()

    def rotate(x):
        x1, x2 = x[..., :half].float(), x[..., half: 2 * half].float()
        c, s = cos.float()[:, None, :], sin.float()[:, None, :]

        def rnd(t):
            return t.to(x.dtype).float()

        lo = rnd(rnd(x1 * c) + rnd(-x2 * s))
        hi = rnd(rnd(x2 * c) + rnd(x1 * s))
        return torch.cat([lo.to(x.dtype), hi.to(x.dtype), x[..., 2 * half:]], dim=-1)

    return rotate(q), rotate(k)


# --- MLP activation and embedding --------------------------------------------------------------

def silu_mul_reference(gate_or_gate_up, up=None):
    """SwiGLU, HF order: silu(gate) in fp32 rounded to the dtype, times up, rounded.
    With one argument, its last dim holds [gate | up]."""
    if up is None:
        half = gate_or_gate_up.shape[-1] // 2
        gate, up = gate_or_gate_up[..., :half], gate_or_gate_up[..., half:]
    else:
        gate = gate_or_gate_up
    act = torch.nn.functional.silu(gate.float()).to(gate.dtype)
    return (act.float() * up.float()).to(gate.dtype)


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

def attention_reference(q, k_cache, v_cache, lens, tree_mask=None, scale=None, slots=None, offsets=None):
    """q [B, T, H, D]; cache [slots, KH, S, D] already holding the T new tokens at rows
    lens[b] + offsets[b] + t of slot slots[b] (offsets default 0, slots default b). Query t sees
    rows < lens[b] and row lens[b] + u (u < offsets[b] + T) where tree_mask[b, t, u] (u <=
    offsets[b] + t without a mask; u == offsets[b] + t always). fp32 scores, softmax and P@V;
    output in q.dtype."""
    B, T, H, D = q.shape
    KH = k_cache.shape[1]
    scale = D ** -0.5 if scale is None else scale
    out = torch.empty_like(q)
    for b in range(B):
        L = int(lens[b])
        off = 0 if offsets is None else int(offsets[b])
        slot = b if slots is None else int(slots[b])
        U = off + T
        keys = k_cache[slot, :, : L + U].float().repeat_interleave(H // KH, dim=0)    # [H, L+U, D]
        vals = v_cache[slot, :, : L + U].float().repeat_interleave(H // KH, dim=0)
        own = torch.zeros(T, U, dtype=torch.bool)
        own[torch.arange(T), off + torch.arange(T)] = True
        if tree_mask is None:
            new_ok = torch.arange(U)[None, :] <= (off + torch.arange(T))[:, None]
        else:
            new_ok = tree_mask[b, :, :U].cpu().bool() | own
        allowed = torch.cat([torch.ones(T, L, dtype=torch.bool), new_ok], dim=1).to(q.device)   # [T, L+U]
        scores = torch.einsum("thd,hsd->hts", q[b].float(), keys) * scale
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        probs = scores.softmax(dim=-1)
        out[b] = torch.einsum("hts,hsd->thd", probs, vals).to(q.dtype)
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
