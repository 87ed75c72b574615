"""The design check behind the next gated delta tree kernel (docs/HYBRID.md): the gated delta rule
over a token tree in the chunked WY form, with the causal mask replaced by the ancestor mask,
gives every node's output and state as the token-by-token recurrence from its parent does.

Per head, with G_t the sum of the log decays along t's path and M the strict-ancestor mask:
  (I + L) U = beta * (V - e^G K S0),   L[j, i] = beta_j e^(G_j - G_i) (k_i . k_j) M[j, i]
  o_t = e^(G_t) S0^T q_t + sum_{j in path(t)} e^(G_t - G_j) (k_j . q_t) u_j
  S_t = e^(G_t) S0 + sum_{j in path(t)} e^(G_t - G_j) k_j u_j^T
so the tree's outputs are a few [T, T] and [T, D] matrix products and one triangular solve
(parents precede children), not a serial replay of each path. float64, so the forms agree to
1e-10; the recurrence is backends/reference/recurrent.py's order of operations."""
import torch


def _tree(T, gen):
    return [-1] + [int(torch.randint(-1, t, (1,), generator=gen)) for t in range(1, T)]  # -1: from S0


def _recurrence(S0, q, k, v, beta, g, parents):
    states, outs = [], []
    for t, p in enumerate(parents):
        s = (S0 if p < 0 else states[p]) * torch.exp(g[t])
        delta = (v[t] - s.T @ k[t]) * beta[t]
        s = s + torch.outer(k[t], delta)
        states.append(s)
        outs.append(s.T @ q[t])
    return torch.stack(outs), torch.stack(states)


def _wy_form(S0, q, k, v, beta, g, parents):
    T = len(parents)
    path = torch.eye(T, dtype=torch.bool)  # path[t, j]: j is t or an ancestor of t
    for t, p in enumerate(parents):
        if p >= 0:
            path[t] |= path[p]
    strict = path & ~torch.eye(T, dtype=torch.bool)
    G = path.double() @ g
    decay = torch.exp(G[:, None] - G[None, :])  # e^(G_t - G_j)
    L = beta[:, None] * decay * (k @ k.T) * strict
    rhs = beta[:, None] * (v - torch.exp(G)[:, None] * (k @ S0))
    U = torch.linalg.solve_triangular(torch.eye(T, dtype=torch.double) + L, rhs, upper=False)
    W = decay * path  # [t, j]
    outs = torch.exp(G)[:, None] * (q @ S0) + (W * (q @ k.T)) @ U
    states = torch.exp(G)[:, None, None] * S0 + torch.einsum("tj,jd,je->tde", W, k, U)
    return outs, states


def test_the_ancestor_masked_wy_form_equals_the_recurrence_on_trees():
    gen = torch.Generator().manual_seed(0)
    for T, dk, dv in ((1, 4, 4), (7, 8, 4), (33, 16, 8), (64, 8, 8)):
        parents = _tree(T, gen)
        k = torch.nn.functional.normalize(torch.randn(T, dk, generator=gen, dtype=torch.double), dim=-1)
        q = torch.nn.functional.normalize(torch.randn(T, dk, generator=gen, dtype=torch.double), dim=-1) * dk ** -0.5
        v = torch.randn(T, dv, generator=gen, dtype=torch.double)
        beta = torch.sigmoid(torch.randn(T, generator=gen, dtype=torch.double))
        g = -torch.nn.functional.softplus(torch.randn(T, generator=gen, dtype=torch.double))
        S0 = torch.randn(dk, dv, generator=gen, dtype=torch.double)
        o_ref, s_ref = _recurrence(S0, q, k, v, beta, g, parents)
        o_wy, s_wy = _wy_form(S0, q, k, v, beta, g, parents)
        assert torch.allclose(o_wy, o_ref, atol=1e-10, rtol=1e-10), T
        assert torch.allclose(s_wy, s_ref, atol=1e-10, rtol=1e-10), T
