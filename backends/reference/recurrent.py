"""Torch reference kernels of the recurrent ops (specir/ir/ops_recurrent.py): the numerics every
other backend's recurrent kernels are tested against.

These are also what runs for recurrent ops on the CPU: the TVM backend's kernel table starts from
the reference table and has no TVM kernels for conv1d, gated_delta_rule or mamba2_scan, so they run
as the torch functions below (the Triton kernels in backends/triton/kernels/ are tested against
them).

Each kernel reads its state through `state.recurrent` (a RecurrentForward): token t starts from
its parent's state (`initial`) and its state after the token is written to scratch (`save`), so a
chain forward, a tree forward and a later `commit` of any node agree with feeding that node's
path one token at a time. A chain (every parent the token before) takes a vectorised path for the
convolution; the recurrences run token by token in fp32 (transformers' recurrent form; its
multi-token chunked form differs only by fp32 rounding).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _key(params, default: str):
    return (params["layer"], params.get("state") or default)


def conv1d(params, state, x, mask):
    """Depthwise causal conv over each token's path, fp32 accumulation cast once (as F.conv1d in
    the model dtype), then the activation in the model dtype."""
    rf, key = state.recurrent, _key(params, "conv")
    weight = params["weight"][:, 0, :].float()  # [C, K]
    bias = params.get("bias")
    B, T, C = x.shape
    K = weight.shape[-1]
    if rf.chain:
        seq = torch.cat([rf.initial(key, 0), x.transpose(1, 2)], dim=-1)  # [B, C, K - 1 + T]
        windows = seq.unfold(-1, K, 1)  # [B, C, T, K]
        y = (windows.float() * weight[None, :, None, :]).sum(-1).transpose(1, 2)  # [B, T, C]
        rf.save_all(key, windows[..., 1:].permute(0, 2, 1, 3))
    else:
        outs = []
        for t in range(T):
            window = torch.cat([rf.initial(key, t), x[:, t, :, None]], dim=-1)  # [B, C, K]
            outs.append((window.float() * weight).sum(-1))
            rf.save(key, t, window[..., 1:])
        y = torch.stack(outs, dim=1)
    if bias is not None:
        y = y + bias.float()
    y = y.to(x.dtype)
    return F.silu(y) if params.get("activation") == "silu" else y


def _l2norm(x, eps: float = 1e-6):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def gated_delta_rule(params, state, qkv, b, a, mask):
    """transformers' torch_recurrent_gated_delta_rule with use_qk_l2norm_in_kernel, token by token
    from each token's parent state."""
    rf, key = state.recurrent, _key(params, "delta")
    hk, hv, dk, dv = params["k_heads"], params["v_heads"], params["k_dim"], params["v_dim"]
    B, T, _ = qkv.shape
    q, k, v = qkv.split([hk * dk, hk * dk, hv * dv], dim=-1)
    rep = hv // hk
    q = _l2norm(q.reshape(B, T, hk, dk).float()).repeat_interleave(rep, dim=2) * dk ** -0.5
    k = _l2norm(k.reshape(B, T, hk, dk).float()).repeat_interleave(rep, dim=2)
    v = v.reshape(B, T, hv, dv).float()
    beta = b.sigmoid().float()  # [B, T, hv] (sigmoid in the model dtype, as transformers)
    g = -params["a_log"].float().exp() * F.softplus(a.float() + params["dt_bias"].float())
    decay = g.exp()
    out = torch.empty(B, T, hv, dv, dtype=torch.float32, device=qkv.device)
    s = None
    for t in range(T):
        s = rf.initial(key, t) if (s is None or not rf.chain) else s  # [B, hv, dk, dv]
        s = s * decay[:, t, :, None, None]
        k_t = k[:, t]
        memory = (s * k_t[..., None]).sum(dim=-2)  # [B, hv, dv]
        delta = (v[:, t] - memory) * beta[:, t, :, None]
        s = s + k_t[..., None] * delta[..., None, :]
        out[:, t] = (s * q[:, t, :, :, None]).sum(dim=-2)
        rf.save(key, t, s)
    return out.reshape(B, T, hv * dv).to(qkv.dtype)


def mamba2_scan(params, state, xbc, dt, mask):
    """Mamba2's selective state update (transformers' recurrent form) token by token from each
    token's parent state, with the dt clamp of the op applied to every token."""
    rf, key = state.recurrent, _key(params, "ssm")
    H, P, G, N = params["heads"], params["head_dim"], params["groups"], params["state_size"]
    B, T, _ = xbc.shape
    x, bm, cm = xbc.split([H * P, G * N, G * N], dim=-1)
    x = x.reshape(B, T, H, P).float()
    bm = bm.reshape(B, T, G, N).float().repeat_interleave(H // G, dim=2)
    cm = cm.reshape(B, T, G, N).float().repeat_interleave(H // G, dim=2)
    dt = F.softplus(dt.float() + params["dt_bias"].float())
    dt = dt.clamp(min=float(params.get("dt_min", 0.0)), max=float(params.get("dt_max", float("inf"))))
    decay = torch.exp(dt * -torch.exp(params["a_log"].float()))  # [B, T, H]
    d = params["d"].float()
    out = torch.empty(B, T, H, P, dtype=torch.float32, device=xbc.device)
    h = None
    for t in range(T):
        h = rf.initial(key, t) if (h is None or not rf.chain) else h  # [B, H, P, N]
        h = h * decay[:, t, :, None, None] + (dt[:, t, :, None, None] * x[:, t, :, :, None]) * bm[:, t, :, None, :]
        out[:, t] = (h * cm[:, t, :, None, :]).sum(dim=-1) + d[:, None] * x[:, t]
        rf.save(key, t, h)
    return out.reshape(B, T, H * P).to(xbc.dtype)


KERNELS = {"conv1d": conv1d, "gated_delta_rule": gated_delta_rule, "mamba2_scan": mamba2_scan}
