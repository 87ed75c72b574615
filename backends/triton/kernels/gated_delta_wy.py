"""Gated delta rule over a token tree in the chunked WY form with the ancestor mask (the tree
verify of the `gated_delta_rule` op; reference: backends/reference/recurrent.py; the form is
checked against the recurrence in tests/hybrid/test_delta_rule_tree_wy_form.py).

One program per (request, value head, block of value channels) takes the whole tree at once.
With S the committed state, G_t the log decays summed along t's path, M the ancestor-or-self
mask and D[t, j] = M[t, j] e^(G_t - G_j):
    (I + L) U = beta (V - e^G K S),   L = beta D (K K^T) off the diagonal
    O = e^G Q S + (D (Q K^T)) U
The triangular solve is a product (I + L)^-1 = (I - L)(I + L^2)(I + L^4)...: L only links a node
to its strict ancestors, so L^d = 0 past the tree's depth d, and log2(d) matrix products (on
tensor cores, tf32x3 on a GPU: near fp32) replace the serial walk. Node states are not written:
the kernel keeps k, u and G as the node's factors (delta_factors.py) and the commit rebuilds the
one state it takes.

A verify forward is the pending token and its draft: 17, 33 or 65 tokens for a 16-, 32- or 64-token
draft, one past the tile. PEEL takes token 0 out of the tile: its state S1 = e^g0 S + k0 u0^T is a
rank-one update, so a token under it (M[t, 0]) gets -beta_t e^(G_t - g0) (k_t . k0) u0 on its
right-hand side and e^(G_t - g0) (q_t . k0) u0 on its output, and the tile holds the other T - 1
(its U equals the whole solve's by block elimination; tokens not under token 0 are untouched).
Numerics: fp32 throughout (q, k L2-normalised with eps 1e-6, q scaled by
Dk^-0.5, beta = sigmoid(b) rounded to the activation dtype as transformers computes it); the
output is rounded once. It differs from the recurrence by fp32 rounding (another order).

A forward some of whose nodes start from a node of an earlier forward (not the committed state)
runs each node's path replay in turn instead (same program, same `_delta_token` arithmetic as
gated_delta.py's PATHS variant), writing full states; the kernel decides per request.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ._numerics import round_to, softplus
from ._state_ring import store_state
from .delta_factors import load_delta_state, shrink_factored
from .gated_delta import _delta_token, delta_inputs


@triton.jit
def _delta_root(row, b_row, a_row, s0, h, kh, dk, in_k, dv, in_v, a_coef, dt_bias, scale,
                HK: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr, act_dtype: tl.constexpr):
    """The peeled root (token 0 of the forward) from the committed state s0 [DKP, BLOCK_V]: its
    normalised key k0 [DKP], its WY value u0 = beta0 (v0 - e^g0 k0 s0) [BLOCK_V], its log decay g0
    and its output e^g0 q0 s0 + (q0 . k0) u0 (its normalised query after its own update)."""
    q0, k0, v0, beta0, g0 = delta_inputs(row, b_row, a_row, h, kh, dk, in_k, dv, in_v, a_coef, dt_bias, scale,
                                         HK, DK, DV, act_dtype)
    u0 = beta0 * (v0 - tl.exp(g0) * tl.sum(k0[:, None] * s0, axis=0))
    o0 = tl.exp(g0) * tl.sum(q0[:, None] * s0, axis=0) + tl.sum(q0 * k0, axis=0) * u0
    return k0, u0, g0, o0


@triton.jit
def _gated_delta_wy_kernel(
    qkv_ptr, b_ptr, a_ptr, a_log_ptr, dt_bias_ptr, out_ptr, committed_ptr, scratch_ptr,
    slots_ptr, base_ptr, nodes_ptr, anc_ptr, path_ptr, depth_ptr, start_ptr,
    fk, fu, fg, fpath, fdepth, fmeta, R,
    T, W, stride_qb, stride_qt, stride_bb, stride_bt, stride_ab, stride_at, stride_ob, stride_ot,
    HK: tl.constexpr, HV: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
    DKP: tl.constexpr, BLOCK_V: tl.constexpr, TP: tl.constexpr, PEEL: tl.constexpr, PRECISION: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    kh = h // (HV // HK)
    r = tl.arange(0, TP)
    t = r + 1 if PEEL else r  # the tile's tokens (PEEL: token 0 is the peeled root, outside the tile)
    in_t = t < T
    dk = tl.arange(0, DKP)
    in_k = dk < DK
    dv = vb * BLOCK_V + tl.arange(0, BLOCK_V)
    in_v = dv < DV
    m2 = in_k[:, None] & in_v[None, :]
    act_dtype = out_ptr.dtype.element_ty
    slot = tl.load(slots_ptr + b).to(tl.int64)
    base = tl.load(base_ptr + slot).to(tl.int64)
    first_node = tl.load(nodes_ptr + b * T).to(tl.int64)
    per_node = HV * DK * DV
    idx = h * DK * DV + dk[:, None] * DV + dv[None, :]
    committed = committed_ptr + slot * per_node
    a_coef = -tl.exp(tl.load(a_log_ptr + h).to(tl.float32))
    dt_bias = tl.load(dt_bias_ptr + h).to(tl.float32)
    scale = 1.0 / tl.sqrt(DK * 1.0)
    starts = tl.maximum(tl.max(tl.load(start_ptr + b * T + t, mask=in_t, other=-1), axis=0),
                        tl.load(start_ptr + b * T))
    if starts < 0:  # every token derives from the committed state: the WY form
        rows = qkv_ptr + b * stride_qb + t[:, None] * stride_qt
        m_tk = in_t[:, None] & in_k[None, :]
        m_tv = in_t[:, None] & in_v[None, :]
        q = tl.load(rows + kh * DK + dk[None, :], mask=m_tk, other=0.0).to(tl.float32)
        k = tl.load(rows + HK * DK + kh * DK + dk[None, :], mask=m_tk, other=0.0).to(tl.float32)
        v = tl.load(rows + 2 * HK * DK + h * DV + dv[None, :], mask=m_tv, other=0.0).to(tl.float32)
        bt = tl.load(b_ptr + b * stride_bb + t * stride_bt + h, mask=in_t, other=0.0).to(tl.float32)
        at = tl.load(a_ptr + b * stride_ab + t * stride_at + h, mask=in_t, other=0.0).to(tl.float32)
        q = q * (tl.rsqrt(tl.sum(q * q, axis=1) + 1e-6) * scale)[:, None]
        k = k * tl.rsqrt(tl.sum(k * k, axis=1) + 1e-6)[:, None]
        frow = slot * R + t
        if vb == 0:
            tl.store(fk + (frow[:, None] * HV + h) * DK + dk[None, :], k, mask=m_tk)
        s0 = tl.load(committed + idx, mask=m2, other=0.0)
        anc = tl.load(anc_ptr + b * T * T + t[:, None] * T + t[None, :], mask=in_t[:, None] & in_t[None, :],
                      other=0) != 0
        g = a_coef * softplus(at + dt_bias)
        G = tl.sum(tl.where(anc, g[None, :], 0.0), axis=1)  # log decay along the path inside the tile
        if PEEL:
            # a token under the root starts from its state S1 = e^g0 S + k0 u0^T: the root enters the
            # tile's right-hand side and outputs as rank-one terms, and its decay joins G
            k0, u0, g0, o0 = _delta_root(qkv_ptr + b * stride_qb, b_ptr + b * stride_bb, a_ptr + b * stride_ab, s0,
                                             h, kh, dk, in_k, dv, in_v, a_coef, dt_bias, scale, HK, DK, DV, act_dtype)
            under = tl.load(anc_ptr + b * T * T + t * T, mask=in_t, other=0) != 0
            under_root = tl.where(under, tl.exp(G), 0.0)  # e^(G inside the tile) for tokens under the root
            kk0 = tl.sum(k * k0[None, :], axis=1)
            qk0 = tl.sum(q * k0[None, :], axis=1)
            G = G + tl.where(under, g0, 0.0)
        # every product with q or k first, so the [T, Dk] tiles are dead before the solve
        kk = tl.dot(k, tl.trans(k), input_precision=PRECISION)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        ks = tl.dot(k, s0, input_precision=PRECISION)
        qs = tl.dot(q, s0, input_precision=PRECISION)
        beta = round_to(1.0 / (1.0 + tl.exp(-bt)), act_dtype).to(tl.float32)
        decay = tl.where(anc, tl.exp(tl.where(anc, G[:, None] - G[None, :], 0.0)), 0.0)
        e_g = tl.exp(G)
        x = tl.where(r[:, None] == r[None, :], 0.0, -(beta[:, None] * decay * kk))  # -L
        u = beta[:, None] * (v - e_g[:, None] * ks)
        o = e_g[:, None] * qs
        if PEEL:
            u = u - (beta * under_root * kk0)[:, None] * u0[None, :]
            o = o + (under_root * qk0)[:, None] * u0[None, :]
        depth = tl.load(depth_ptr + b * T + t, mask=in_t, other=1)
        if PEEL:
            depth = depth - under.to(tl.int32)  # the depth inside the tile
        depth = tl.max(depth, axis=0)
        # U = ...(I + L^4)(I + L^2)(I - L) U: one factor per power of two below the depth; the last
        # power is never squared (a depth of one, L = 0, makes the first factor the identity)
        u = u + tl.dot(x, u, input_precision=PRECISION)
        for _ in range(1, tl.ceil(tl.log2(depth.to(tl.float32))).to(tl.int32)):
            x = tl.dot(x, x, input_precision=PRECISION)
            u = u + tl.dot(x, u, input_precision=PRECISION)
        o = o + tl.dot(decay * qk, u, input_precision=PRECISION)
        tl.store(out_ptr + b * stride_ob + t[:, None] * stride_ot + h * DV + dv[None, :], round_to(o, act_dtype),
                 mask=m_tv)
        tl.store(fu + (frow[:, None] * HV + h) * DV + dv[None, :], u, mask=m_tv)
        if PEEL:
            tl.store(out_ptr + b * stride_ob + h * DV + dv, round_to(o0, act_dtype), mask=in_v)
            tl.store(fu + (slot * R * HV + h) * DV + dv, u0, mask=in_v)
        if vb == 0:
            tl.store(fg + frow * HV + h, G, mask=in_t)
            if PEEL:
                tl.store(fk + (slot * R * HV + h) * DK + dk, k0, mask=in_k)
                tl.store(fg + slot * R * HV + h, g0)
            if h == 0:
                m_tt = in_t[:, None] & (r[None, :] < T)
                path = tl.load(path_ptr + b * T * T + t[:, None] * T + r[None, :], mask=m_tt)
                tl.store(fpath + frow[:, None] * R + r[None, :], path, mask=m_tt)
                tl.store(fdepth + frow, tl.load(depth_ptr + b * T + t, mask=in_t), mask=in_t)
                if PEEL:  # the path column past the tile (a chain's last token), and the root's row
                    last = tl.load(path_ptr + b * T * T + t * T + TP, mask=in_t)
                    tl.store(fpath + frow * R + TP, last, mask=in_t)
                    tl.store(fpath + slot * R * R + r, tl.load(path_ptr + b * T * T + r), mask=r < T)
                    tl.store(fdepth + slot * R, tl.load(depth_ptr + b * T))
                tl.store(fmeta + slot * 3, base)
                tl.store(fmeta + slot * 3 + 1, first_node)
                tl.store(fmeta + slot * 3 + 2, T)
    else:  # some node continues from an earlier forward: replay each node's path, write full states
        if (h == 0) & (vb == 0):
            shrink_factored(fmeta, slot, base, first_node)
        for node in range(0, T):
            s = load_delta_state(tl.load(start_ptr + b * T + node), first_node, committed, scratch_ptr, slot, base, W,
                                 per_node, idx, m2, fk, fu, fg, fpath, fdepth, fmeta, R, h, dk, dv, in_k, in_v,
                                 HV, DK, DV, True)
            qn = tl.zeros([DKP], dtype=tl.float32)
            for i in range(0, tl.load(depth_ptr + b * T + node)):
                j = tl.load(path_ptr + (b * T + node) * T + i).to(tl.int64)
                s, qn = _delta_token(s, qkv_ptr + b * stride_qb + j * stride_qt, b_ptr + b * stride_bb + j * stride_bt,
                                     a_ptr + b * stride_ab + j * stride_at, h, kh, dk, in_k, dv, in_v, a_coef, dt_bias,
                                     scale, HK, DK, DV, act_dtype)
            o = tl.sum(s * qn[:, None], axis=0)
            tl.store(out_ptr + b * stride_ob + node * stride_ot + h * DV + dv, round_to(o, act_dtype), mask=in_v)
            store_state(s, tl.load(nodes_ptr + b * T + node).to(tl.int64), scratch_ptr, slot, base, W, per_node, idx, m2)


# SLOW_TILE: a 32-token tile is never used. At the Qwen3.5-9B shape on an H100 (session 20, call 4, eager profile)
# the kernel took 158 us a launch at 24 tokens and 104 us at 32 (both a 32-token tile) against 43.5 us at 64 and
# 8.7 us at 16, so a verify of 24-32 nodes cost 1.45-1.65x an AR step against 1.27x at 64. Tokens 18 .. 33 run in
# a 64-token tile instead (the padding tokens are masked, as for any T below its tile).
def launch_wy(qkv, b, a, a_log, dt_bias, out, rf, factors, committed, scratch, *, k_heads, v_heads, k_dim, v_dim,
              block_v: int | None = None, num_warps: int | None = None, precision: str | None = None):
    """Run the WY tree kernel (the caller checked that rf is a tree forward of T <= factors.capacity
    nodes). block_v / precision default to 32 / tf32x3 (ieee under the interpreter), num_warps to 4, or 8 with
    the root peeled: at the Qwen3.5-9B shape on an H100 (session 18), 64 tokens took 26.3 us a launch at
    32 / 4 against 38.4 at 32 / 8, and 65 tokens 41.2 at 32 / 8 against 58.1 at 32 / 4 and 58.8 at 64 / 8.
    block_v 16 at 8 warps computed wrong outputs when compiled there (caught by
    bench/recurrent_tree_kernels.py's checks; every other configuration agreed with PATHS): a block
    under 32 (v_dim <= 16) launches at 4 warps.
    The tile is T tokens padded to a power of two, or, where T is one past a power of two (a verify
    of the pending token and a 16- or 64-token draft), the T - 1 tokens after the peeled root; never
    32 tokens: SLOW_TILE."""
    from ._interpreter_compat import interpreting
    B, T, _ = qkv.shape
    if T > factors.capacity:
        raise ValueError(f"the WY kernel keeps the factors of {factors.capacity} tokens at most, got {T}")
    path, depth, start = rf.paths()
    block = max(16, min(block_v or 32, triton.next_power_of_2(v_dim)))
    precision = precision or ("ieee" if interpreting() else "tf32x3")
    tile = max(16, triton.next_power_of_2(T))
    peel = T > 1 and max(16, triton.next_power_of_2(T - 1)) < tile
    if (tile // 2 if peel else tile) == 32:  # T = 18 .. 33: a 64-token tile, unpeeled (SLOW_TILE)
        tile, peel = 64, False
    _gated_delta_wy_kernel[(B, v_heads, triton.cdiv(v_dim, block))](
        qkv, b, a, a_log, dt_bias, out, committed, scratch,
        rf.slots.contiguous(), rf.store.base, rf.nodes.contiguous(), rf.ancestors(), path, depth, start,
        *factors.args(), T, rf.store.nodes,
        qkv.stride(0), qkv.stride(1), b.stride(0), b.stride(1), a.stride(0), a.stride(1), out.stride(0), out.stride(1),
        HK=k_heads, HV=v_heads, DK=k_dim, DV=v_dim, DKP=max(16, triton.next_power_of_2(k_dim)), BLOCK_V=block,
        TP=tile // 2 if peel else tile, PEEL=peel, PRECISION=precision,
        num_warps=num_warps or (8 if peel and block >= 32 else 4))
    return out
