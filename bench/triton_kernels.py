"""Micro-benchmark of the non-linear Triton kernels at the Llama-3.1-8B shape (H100/H200).

    python bench/triton_kernels.py --out DIR [--quick] [--sweep]

Times every kernel with triton.testing.do_bench (median; L2 flushed before each call, so KV
and activations come from HBM as inside a real decode step) and reports the bytes each call
must move, the achieved GB/s and its share of the measured device-to-device copy bandwidth.
Small kernels (one token) are latency-bound: their GB/s says little; their microseconds count.
Each case is also checked once against its torch reference (max relative error, or 0 / inf for
exact kernels, in the JSON and the table). `--sweep` also tries attention launch configurations
and reports the best per case. Writes DIR/triton_kernels.json and prints a table last.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import sys
import time

import torch

import _checkout  # noqa: E402,F401  (a plain checkout runs too)

DT = torch.bfloat16
EB = 2  # bytes per bf16 element


@dataclasses.dataclass
class Sizes:
    """Model shape and the cases to time (defaults: Llama-3.1-8B on one GPU)."""
    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    intermediate: int = 14336
    vocab: int = 128256
    rows: tuple = (1, 64, 256)                 # tokens per call of the elementwise kernels
    decode_contexts: tuple = (512, 2048, 8192)
    decode_batches: tuple = (8, 32)            # extra decode cases at context 2048
    batched_context: int = 2048
    tree_contexts: tuple = (512, 2048)
    tree_sizes: tuple = (1, 16, 32, 64, 128)
    kv_cases: tuple = ((1, 1), (1, 64), (32, 8))
    kv_context: int = 2048
    accept_cases: tuple = ((1, 64), (32, 64), (1, 128))
    argmax_rows: tuple = (1, 64)
    device: str = "cuda"


QUICK = dict(rows=(1, 64), decode_batches=(), tree_sizes=(1, 16, 64, 128))
# tiny shapes for the CPU smoke test of this script (tests/triton/test_triton_bench_smoke.py)
SMOKE = dict(hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=96, vocab=300, rows=(1, 3),
             decode_contexts=(20,), decode_batches=(2,), batched_context=20, tree_contexts=(20,), tree_sizes=(1, 5),
             kv_cases=((1, 1), (2, 4)), kv_context=24, accept_cases=((2, 6),), argmax_rows=(1, 2), device="cpu")


def _rel_err(actual, expected):
    a, e = actual.float(), expected.float()
    if not torch.isfinite(a).all():
        return float("inf")
    scale = e.pow(2).mean().sqrt().item() + 1e-30
    return ((a - e).abs() / (e.abs() + scale)).max().item()


def _exact(equal: bool) -> float:
    return 0.0 if equal else float("inf")


def _random_tree(T, device):
    """(parents [T], ancestor-or-self mask [T, T]) of a bushy random tree, a few levels deep."""
    parents = torch.full((T,), -1, dtype=torch.int32)
    mask = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        if t:
            parents[t] = int(torch.randint(max(0, t - 4), t, ()))
            mask[t] = mask[parents[t]]
        mask[t, t] = True
    return parents.to(device), mask.to(device)


class Bench:
    def __init__(self, z: Sizes, quick: bool, sweep: bool, timer=None):
        self.z, self.quick, self.sweep = z, quick, sweep
        self.rep, self.warmup = (20, 5) if quick else (60, 15)
        if timer is None:
            import triton.testing
            timer = lambda fn: triton.testing.do_bench(fn, warmup=self.warmup, rep=self.rep, return_mode="median")  # noqa: E731
        self.time_ms = timer
        self.rows: list[dict] = []
        self.copy_gbs = self._copy_bandwidth()

    def _copy_bandwidth(self):
        src = torch.empty(1 << (30 if self.z.device == "cuda" else 20), dtype=torch.uint8, device=self.z.device)
        dst = torch.empty_like(src)
        return 2 * src.numel() / self.time_ms(lambda: dst.copy_(src)) / 1e6

    def add(self, kernel, shape, fn, nbytes, check=None, torch_fn=None, extra=None):
        t0 = time.time()
        row = {"kernel": kernel, "shape": shape, "bytes": int(nbytes)}
        try:
            if check is not None:
                row["max_rel_err"] = check()
            ms = self.time_ms(fn)
            row.update(us=ms * 1e3, gbs=nbytes / ms / 1e6)
            row["pct_copy_bw"] = 100 * row["gbs"] / self.copy_gbs
            if torch_fn is not None:
                row["torch_us"] = self.time_ms(torch_fn) * 1e3
        except Exception as exc:  # keep benchmarking the other kernels
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        row.update(extra or {})
        row["wall_s"] = round(time.time() - t0, 2)
        self.rows.append(row)
        timing = f"{row['us']:9.2f} us {row['gbs']:8.0f} GB/s" if "us" in row else row.get("error", "")
        print(f"  {kernel:18s} {shape:34s} {timing}", flush=True)


def bench_elementwise(b: Bench):
    from specir import kernel_reference as ref
    from specir.backends.triton.kernels.activation import silu_mul
    from specir.backends.triton.kernels.embedding import embedding
    from specir.backends.triton.kernels.norm import add_rms_norm, rms_norm
    from specir.backends.triton.kernels.rope import rope, rope_kv_write

    z, dev = b.z, b.z.device
    H, KH, D, N, I = z.heads, z.kv_heads, z.head_dim, z.hidden, z.intermediate
    for M in z.rows:
        x = torch.randn(M, N, device=dev, dtype=DT)
        res = torch.randn(M, N, device=dev, dtype=DT)
        w = torch.rand(N, device=dev, dtype=DT) + 0.5
        out, res_out = torch.empty_like(x), torch.empty_like(x)
        b.add("rms_norm", f"M={M} N={N}", lambda: rms_norm(x, w, 1e-5, out=out), (2 * M + 1) * N * EB,
              check=lambda: _rel_err(rms_norm(x, w, 1e-5), ref.rms_norm_reference(x, w, 1e-5)),
              torch_fn=lambda: ref.rms_norm_reference(x, w, 1e-5))
        b.add("add_rms_norm", f"M={M} N={N}", lambda: add_rms_norm(x, res, w, 1e-5, out=out, residual_out=res_out),
              (4 * M + 1) * N * EB,
              check=lambda: _rel_err(add_rms_norm(x, res, w, 1e-5)[0], ref.add_rms_norm_reference(x, res, w, 1e-5)[0]))

        gate_up = torch.randn(M, 2 * I, device=dev, dtype=DT)
        act = torch.empty(M, I, device=dev, dtype=DT)
        b.add("silu_mul", f"M={M} I={I}", lambda: silu_mul(gate_up, out=act), 3 * M * I * EB,
              check=lambda: _rel_err(silu_mul(gate_up), ref.silu_mul_reference(gate_up)),
              torch_fn=lambda: torch.nn.functional.silu(gate_up[:, :I]) * gate_up[:, I:])

        table = torch.randn(z.vocab, N, device=dev, dtype=DT)
        ids = torch.randint(0, z.vocab, (M,), device=dev)
        emb = torch.empty(M, N, device=dev, dtype=DT)
        b.add("embedding", f"M={M} V={z.vocab}", lambda: embedding(ids, table, out=emb), 2 * M * N * EB,
              check=lambda: _exact(torch.equal(embedding(ids, table), ref.embedding_reference(ids, table))))
        del table

        qkv = torch.randn(M, (H + 2 * KH) * D, device=dev, dtype=DT)
        q = qkv[:, : H * D].view(M, H, D)
        k = qkv[:, H * D: (H + KH) * D].view(M, KH, D)
        v = qkv[:, (H + KH) * D:].view(M, KH, D)
        pos = torch.randint(0, 8192, (1, M), device=dev)
        inv_freq = 1.0 / (500000.0 ** (torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D))
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        rope_bytes = 2 * M * (H + KH) * D * EB
        b.add("rope", f"M={M} q{H}/k{KH}x{D}", lambda: rope(q, k, pos, inv_freq, q_out=q_out, k_out=k_out), rope_bytes,
              check=lambda: _rel_err(rope(q, k, pos, inv_freq)[0], ref.rope_reference(q, k, pos, inv_freq)[0]))
        k_cache = torch.zeros(1, KH, 8192 + M, D, device=dev, dtype=DT)
        v_cache = torch.zeros_like(k_cache)
        lens = torch.tensor([4000], dtype=torch.int32, device=dev)
        b.add("rope_kv_write", f"M={M} (rope + kv_write)",
              lambda: rope_kv_write(q.view(1, M, H, D), k.view(1, M, KH, D), v.view(1, M, KH, D), pos, inv_freq,
                                    k_cache, v_cache, lens, q_out=q_out.view(1, M, H, D)),
              rope_bytes + 2 * M * KH * D * EB)


def bench_kv_cache(b: Bench):
    from specir import kernel_reference as ref
    from specir.backends.triton.kernels.kv_cache import kv_compact, kv_write

    z, dev = b.z, b.z.device
    KH, D = z.kv_heads, z.head_dim
    for B, T in z.kv_cases:
        S = z.kv_context + T
        k_cache = torch.zeros(B, KH, S, D, device=dev, dtype=DT)
        v_cache = torch.zeros_like(k_cache)
        k_new = torch.randn(B, T, KH, D, device=dev, dtype=DT)
        v_new = torch.randn_like(k_new)
        lens = torch.randint(z.kv_context // 2, z.kv_context, (B,), dtype=torch.int32, device=dev)
        b.add("kv_write", f"B={B} T={T}", lambda: kv_write(k_cache, v_cache, k_new, v_new, lens), 4 * B * T * KH * D * EB)
        # compaction of a branching acceptance: every other node of the first 2*n accepted
        n = min(8, (T + 1) // 2)
        acc_idx = torch.zeros(B, T, dtype=torch.int32, device=dev)
        acc_idx[:, :n] = torch.arange(0, 2 * n, 2, dtype=torch.int32, device=dev)
        n_acc = torch.full((B,), n, dtype=torch.int32, device=dev)
        new_lens = torch.empty_like(lens)

        def check():
            kc, vc, kc2, vc2 = k_cache.clone(), v_cache.clone(), k_cache.clone(), v_cache.clone()
            kv_compact(kc, vc, lens, acc_idx, n_acc)
            ref.kv_compact_reference(kc2, vc2, lens, acc_idx, n_acc)
            return _exact(torch.equal(kc, kc2) and torch.equal(vc, vc2))
        b.add("kv_compact", f"B={B} T={T} n_acc={n}", lambda: kv_compact(k_cache, v_cache, lens, acc_idx, n_acc, new_lens),
              4 * B * n * KH * D * EB, check=check)


def _attention_sweep_grid(T):
    if T == 1:
        return [dict(block_n=bn, num_stages=ns, num_warps=nw, num_splits=sp)
                for bn, ns, nw, sp in itertools.product((32, 64, 128), (2, 3), (4, 8), (None, 16, 32, 64))]
    return [dict(block_m=bm, block_n=bn, num_warps=nw, num_stages=ns, min_chunk=mc)
            for bm, bn, nw, ns, mc in itertools.product((32, 64, 128), (32, 64), (4, 8), (2, 3), (None, 128, 512, 2048))]


def _attention_case(b: Bench, B, T, ctx, tree: bool, label: str):
    from specir import kernel_reference as ref
    from specir.backends.triton.kernels.attention import MAX_SPLITS, attention, attention_config, attention_workspace

    z, dev = b.z, b.z.device
    H, KH, D = z.heads, z.kv_heads, z.head_dim
    S = ctx + T
    q = torch.randn(B, T, H, D, device=dev, dtype=DT)
    k_cache = torch.randn(B, KH, S, D, device=dev, dtype=DT)
    v_cache = torch.randn_like(k_cache)
    lens = torch.full((B,), ctx, dtype=torch.int32, device=dev)
    mask = torch.stack([_random_tree(T, dev)[1] for _ in range(B)]) if tree else None
    out = torch.empty_like(q)
    workspace = attention_workspace(B, T, H, D, MAX_SPLITS, dev)
    nbytes = (2 * q.numel() + 2 * B * KH * (ctx + T) * D) * EB
    cfg = attention_config(B, T, H, KH, D, S, q.device)

    def torch_sdpa():
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k_cache[:, :, : ctx + 1], v_cache[:, :, : ctx + 1], enable_gqa=True)

    b.add("attention", f"{label} B={B} T={T} ctx={ctx}",
          lambda: attention(q, k_cache, v_cache, lens, mask, out=out, workspace=workspace), nbytes,
          check=lambda: _rel_err(attention(q, k_cache, v_cache, lens, mask),
                                 ref.attention_reference(q, k_cache, v_cache, lens, mask)),
          torch_fn=torch_sdpa if T == 1 else None,
          extra={"config": {k: cfg[k] for k in ("num_splits", "block_m", "block_n", "min_chunk", "num_warps")}})
    if b.sweep:
        best = None
        for conf in _attention_sweep_grid(T):
            try:
                ms = b.time_ms(lambda: attention(q, k_cache, v_cache, lens, mask, out=out, workspace=workspace, **conf))
            except Exception:
                continue
            if best is None or ms < best[0]:
                best = (ms, conf)
        if best:
            b.rows[-1]["sweep_best"] = {"us": best[0] * 1e3, **best[1]}
            print(f"      sweep best {best[0] * 1e3:.2f} us with {best[1]}", flush=True)


def bench_attention(b: Bench):
    z = b.z
    for ctx in z.decode_contexts:
        _attention_case(b, 1, 1, ctx, False, "decode")
    for B in z.decode_batches:
        _attention_case(b, B, 1, z.batched_context, False, "decode")
    for ctx in z.tree_contexts:
        for T in z.tree_sizes:
            _attention_case(b, 1, T, ctx, T > 1, "tree")


def bench_accept(b: Bench):
    from specir import kernel_reference as ref
    from specir.backends.triton.kernels.accept import greedy_accept_tree
    from specir.backends.triton.kernels.argmax import argmax

    dev = b.z.device
    for B, T in b.z.accept_cases:
        parents = torch.stack([_random_tree(T, dev)[0] for _ in range(B)])
        target = torch.randint(0, 4, (B, T), device=dev)
        tokens = torch.randint(0, 4, (B, T), device=dev)
        outs = (torch.empty(B, T, dtype=torch.int32, device=dev), torch.empty(B, dtype=torch.int32, device=dev),
                torch.empty(B, dtype=torch.int64, device=dev))

        def check():
            got, want = greedy_accept_tree(tokens, parents, target), ref.greedy_accept_tree_reference(tokens, parents, target)
            return _exact(all(torch.equal(g, w) for g, w in zip(got, want)))
        b.add("greedy_accept", f"B={B} T={T}",
              lambda: greedy_accept_tree(tokens, parents, target, acc_idx=outs[0], n_acc=outs[1], bonus=outs[2]),
              B * T * (8 + 4 + 8 + 4), check=check)
    for M in b.z.argmax_rows:
        logits = torch.randn(M, b.z.vocab, device=dev, dtype=DT)
        idx = torch.empty(M, dtype=torch.int64, device=dev)
        b.add("argmax", f"M={M} V={b.z.vocab}", lambda: argmax(logits, out=idx), M * b.z.vocab * EB,
              check=lambda: _exact(torch.equal(argmax(logits), ref.argmax_reference(logits))),
              torch_fn=lambda: torch.argmax(logits, dim=-1))


def run(z: Sizes, quick=False, sweep=False, timer=None) -> dict:
    torch.manual_seed(0)
    start = time.time()
    b = Bench(z, quick, sweep, timer)
    name = torch.cuda.get_device_name() if z.device == "cuda" else z.device
    print(f"device {name}  copy bandwidth {b.copy_gbs:.0f} GB/s", flush=True)
    for section in (bench_elementwise, bench_kv_cache, bench_attention, bench_accept):
        section(b)
        if z.device == "cuda":
            torch.cuda.empty_cache()
    import triton
    return {"device": name, "torch": torch.__version__, "triton": triton.__version__, "copy_gbs": b.copy_gbs,
            "quick": quick, "sizes": dataclasses.asdict(z), "wall_s": round(time.time() - start, 1), "results": b.rows}


def print_table(result: dict) -> None:
    print(f"\n{'kernel':16s} {'shape':34s} {'us':>9s} {'GB/s':>7s} {'%copy':>6s} {'torch us':>9s} {'rel err':>8s}")
    for r in result["results"]:
        if "error" in r:
            print(f"{r['kernel']:16s} {r['shape']:34s} ERROR {r['error'][:80]}")
            continue
        torch_us = f"{r['torch_us']:9.2f}" if "torch_us" in r else f"{'':9s}"
        err = r.get("max_rel_err")
        err_s = "" if err is None else (f"{err:8.1e}" if math.isfinite(err) else "   WRONG")
        print(f"{r['kernel']:16s} {r['shape']:34s} {r['us']:9.2f} {r['gbs']:7.0f} {r['pct_copy_bw']:5.0f}% {torch_us} {err_s}")
    print(f"copy bandwidth {result['copy_gbs']:.0f} GB/s; {len(result['results'])} cases in {result['wall_s']} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for triton_kernels.json")
    parser.add_argument("--quick", action="store_true", help="fewer shapes, shorter timing")
    parser.add_argument("--sweep", action="store_true", help="also sweep attention launch configs (slow)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("0", ""):
        print("error: needs a CUDA GPU (and TRITON_INTERPRET unset)", file=sys.stderr)
        return 2
    result = run(Sizes(**(QUICK if args.quick else {})), args.quick, args.sweep)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "triton_kernels.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print_table(result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
