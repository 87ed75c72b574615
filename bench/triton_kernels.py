"""Micro-benchmark of the non-linear Triton kernels at the Llama-3.1-8B shape (H100/H200).

    python bench/triton_kernels.py --out DIR [--quick] [--sweep]

Times every kernel with triton.testing.do_bench (median; L2 flushed before each call, so KV
and activations come from HBM as inside a real decode step) and reports the bytes each call
must move, the achieved GB/s and its share of the measured device-to-device copy bandwidth.
Small kernels (one token) are latency-bound: their GB/s says little; their microseconds count.
Each case is also checked against its torch reference once (max relative error in the JSON).
`--sweep` additionally tries attention launch configurations and reports the best per case.
Writes DIR/triton_kernels.json and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch

def _make_specir_importable():
    """Allow running from a plain checkout (no `pip install -e .`): `specir.backends` is mapped to
    the top-level `backends/` folder by pyproject's package-dir, which only an install sets up."""
    try:
        import specir.backends.triton.kernels  # noqa: F401
        return
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    import specir
    specir.__path__.append(root)


_make_specir_importable()

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE, VOCAB = 4096, 32, 8, 128, 14336, 128256
DT = torch.bfloat16
EB = 2  # bytes per bf16 element


def _rel_err(actual, expected):
    a, e = actual.float(), expected.float()
    if not torch.isfinite(a).all():
        return float("inf")
    scale = e.pow(2).mean().sqrt().item() + 1e-30
    return ((a - e).abs() / (e.abs() + scale)).max().item()


def _random_tree(T, device):
    parents = torch.full((T,), -1, dtype=torch.int32)
    mask = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        if t:
            parents[t] = int(torch.randint(max(0, t - 4), t, ()))   # bushy, a few levels deep
            mask[t] = mask[parents[t]]
        mask[t, t] = True
    return parents.to(device), mask.to(device)


class Bench:
    def __init__(self, quick: bool, sweep: bool):
        import triton.testing
        self.do_bench = triton.testing.do_bench
        self.rep, self.warmup = (20, 5) if quick else (60, 15)
        self.quick, self.sweep = quick, sweep
        self.rows: list[dict] = []
        self.copy_gbs = self._copy_bandwidth()

    def time_ms(self, fn):
        return self.do_bench(fn, warmup=self.warmup, rep=self.rep, return_mode="median")

    def _copy_bandwidth(self):
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        ms = self.time_ms(lambda: dst.copy_(src))
        return 2 * src.numel() / ms / 1e6

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
        print(f"  {kernel:18s} {shape:34s} " + (f"{row['us']:9.2f} us {row['gbs']:8.0f} GB/s" if "us" in row else row.get("error", "")), flush=True)


def bench_elementwise(b: Bench):
    from specir.backends.triton.kernels import reference as ref
    from specir.backends.triton.kernels.activation import silu_mul
    from specir.backends.triton.kernels.embedding import embedding
    from specir.backends.triton.kernels.norm import add_rms_norm, rms_norm
    from specir.backends.triton.kernels.rope import rope, rope_kv_write

    for M in ((1, 64) if b.quick else (1, 64, 256)):
        x = torch.randn(M, HIDDEN, device="cuda", dtype=DT)
        res = torch.randn(M, HIDDEN, device="cuda", dtype=DT)
        w = torch.rand(HIDDEN, device="cuda", dtype=DT) + 0.5
        out, res_out = torch.empty_like(x), torch.empty_like(x)
        b.add("rms_norm", f"M={M} N={HIDDEN}", lambda: rms_norm(x, w, 1e-5, out=out), (2 * M + 1) * HIDDEN * EB,
              check=lambda: _rel_err(rms_norm(x, w, 1e-5), ref.rms_norm_reference(x, w, 1e-5)),
              torch_fn=lambda: ref.rms_norm_reference(x, w, 1e-5))
        b.add("add_rms_norm", f"M={M} N={HIDDEN}", lambda: add_rms_norm(x, res, w, 1e-5, out=out, residual_out=res_out),
              (4 * M + 1) * HIDDEN * EB,
              check=lambda: _rel_err(add_rms_norm(x, res, w, 1e-5)[0], ref.add_rms_norm_reference(x, res, w, 1e-5)[0]))

        gate_up = torch.randn(M, 2 * INTERMEDIATE, device="cuda", dtype=DT)
        act = torch.empty(M, INTERMEDIATE, device="cuda", dtype=DT)
        b.add("silu_mul", f"M={M} I={INTERMEDIATE}", lambda: silu_mul(gate_up, out=act), 3 * M * INTERMEDIATE * EB,
              check=lambda: _rel_err(silu_mul(gate_up), ref.silu_mul_reference(gate_up)),
              torch_fn=lambda: torch.nn.functional.silu(gate_up[:, :INTERMEDIATE]) * gate_up[:, INTERMEDIATE:])

        table = torch.randn(VOCAB, HIDDEN, device="cuda", dtype=DT)
        ids = torch.randint(0, VOCAB, (M,), device="cuda")
        emb = torch.empty(M, HIDDEN, device="cuda", dtype=DT)
        b.add("embedding", f"M={M} V={VOCAB}", lambda: embedding(ids, table, out=emb), 2 * M * HIDDEN * EB,
              check=lambda: _rel_err(embedding(ids, table), ref.embedding_reference(ids, table)))
        del table

        qkv = torch.randn(M, (HEADS + 2 * KV_HEADS) * HEAD_DIM, device="cuda", dtype=DT)
        q = qkv[:, : HEADS * HEAD_DIM].view(M, HEADS, HEAD_DIM)
        k = qkv[:, HEADS * HEAD_DIM: (HEADS + KV_HEADS) * HEAD_DIM].view(M, KV_HEADS, HEAD_DIM)
        v = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM:].view(M, KV_HEADS, HEAD_DIM)
        pos = torch.randint(0, 8192, (1, M), device="cuda")
        inv_freq = 1.0 / (500000.0 ** (torch.arange(0, HEAD_DIM, 2, device="cuda", dtype=torch.float32) / HEAD_DIM))
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        rope_bytes = 2 * M * (HEADS + KV_HEADS) * HEAD_DIM * EB
        b.add("rope", f"M={M} q{HEADS}/k{KV_HEADS}x{HEAD_DIM}", lambda: rope(q, k, pos, inv_freq, q_out=q_out, k_out=k_out),
              rope_bytes,
              check=lambda: _rel_err(rope(q, k, pos, inv_freq)[0], ref.rope_reference(q, k, pos, inv_freq)[0]))
        k_cache = torch.zeros(1, KV_HEADS, 8192 + M, HEAD_DIM, device="cuda", dtype=DT)
        v_cache = torch.zeros_like(k_cache)
        lens = torch.tensor([4000], dtype=torch.int32, device="cuda")
        b.add("rope_kv_write", f"M={M} (rope + kv_write)",
              lambda: rope_kv_write(q.view(1, M, HEADS, HEAD_DIM), k.view(1, M, KV_HEADS, HEAD_DIM),
                                    v.view(1, M, KV_HEADS, HEAD_DIM), pos, inv_freq, k_cache, v_cache, lens,
                                    q_out=q_out.view(1, M, HEADS, HEAD_DIM)),
              rope_bytes + 2 * M * KV_HEADS * HEAD_DIM * EB)


def bench_kv_cache(b: Bench):
    from specir.backends.triton.kernels import reference as ref
    from specir.backends.triton.kernels.kv_cache import kv_compact, kv_write

    for B, T in ((1, 1), (1, 64), (32, 8)):
        S = 2048 + T
        k_cache = torch.zeros(B, KV_HEADS, S, HEAD_DIM, device="cuda", dtype=DT)
        v_cache = torch.zeros_like(k_cache)
        k_new = torch.randn(B, T, KV_HEADS, HEAD_DIM, device="cuda", dtype=DT)
        v_new = torch.randn_like(k_new)
        lens = torch.randint(1000, 2048, (B,), dtype=torch.int32, device="cuda")
        b.add("kv_write", f"B={B} T={T}", lambda: kv_write(k_cache, v_cache, k_new, v_new, lens),
              4 * B * T * KV_HEADS * HEAD_DIM * EB)
        # compaction of a branching acceptance: every other node of the first 2*n accepted
        n = min(8, (T + 1) // 2)
        acc_idx = torch.zeros(B, T, dtype=torch.int32, device="cuda")
        acc_idx[:, :n] = torch.arange(0, 2 * n, 2, dtype=torch.int32, device="cuda")
        n_acc = torch.full((B,), n, dtype=torch.int32, device="cuda")
        new_lens = torch.empty_like(lens)

        def check():
            kc, vc, kc2, vc2 = k_cache.clone(), v_cache.clone(), k_cache.clone(), v_cache.clone()
            kv_compact(kc, vc, lens, acc_idx, n_acc)
            ref.kv_compact_reference(kc2, vc2, lens, acc_idx, n_acc)
            return 0.0 if torch.equal(kc, kc2) and torch.equal(vc, vc2) else float("inf")
        b.add("kv_compact", f"B={B} T={T} n_acc={n}", lambda: kv_compact(k_cache, v_cache, lens, acc_idx, n_acc, new_lens),
              4 * B * n * KV_HEADS * HEAD_DIM * EB, check=check)


def _attention_case(b: Bench, B, T, ctx, tree: bool, label: str):
    from specir.backends.triton.kernels import reference as ref
    from specir.backends.triton.kernels.attention import attention, attention_config, attention_workspace

    S = ctx + T
    q = torch.randn(B, T, HEADS, HEAD_DIM, device="cuda", dtype=DT)
    k_cache = torch.randn(B, KV_HEADS, S, HEAD_DIM, device="cuda", dtype=DT)
    v_cache = torch.randn_like(k_cache)
    lens = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
    mask = None
    if tree:
        mask = torch.stack([_random_tree(T, "cuda")[1] for _ in range(B)])
    out = torch.empty_like(q)
    workspace = attention_workspace(B, T, HEADS, HEAD_DIM, 64, "cuda")
    nbytes = (2 * q.numel() + 2 * B * KV_HEADS * (ctx + T) * HEAD_DIM) * EB
    cfg = attention_config(B, T, HEADS, KV_HEADS, HEAD_DIM, S, q.device)

    def torch_sdpa():
        if T != 1:
            return None
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k_cache[:, :, : ctx + 1], v_cache[:, :, : ctx + 1], enable_gqa=True)

    b.add("attention", f"{label} B={B} T={T} ctx={ctx}",
          lambda: attention(q, k_cache, v_cache, lens, mask, out=out, workspace=workspace), nbytes,
          check=lambda: _rel_err(attention(q, k_cache, v_cache, lens, mask),
                                 ref.attention_reference(q, k_cache, v_cache, lens, mask)),
          torch_fn=torch_sdpa if T == 1 else None,
          extra={"config": {k: cfg[k] for k in ("num_splits", "block_m", "block_n")}})
    if b.sweep:
        best = None
        for block_n in (32, 64, 128):
            for num_stages in (2, 3):
                for num_warps in (4, 8):
                    for splits in (None, 8, 16, 32):
                        conf = dict(block_n=block_n, num_stages=num_stages, num_warps=num_warps, num_splits=splits)
                        try:
                            ms = b.time_ms(lambda: attention(q, k_cache, v_cache, lens, mask, out=out,
                                                             workspace=workspace, **conf))
                        except Exception:
                            continue
                        if best is None or ms < best[0]:
                            best = (ms, conf)
        if best:
            b.rows[-1]["sweep_best"] = {"us": best[0] * 1e3, **best[1]}
            print(f"      sweep best {best[0] * 1e3:.2f} us with {best[1]}", flush=True)


def bench_attention(b: Bench):
    for ctx in (512, 2048, 8192):
        _attention_case(b, 1, 1, ctx, False, "decode")
    if not b.quick:
        for B in (8, 32):
            _attention_case(b, B, 1, 2048, False, "decode")
    for ctx in (512, 2048):
        for T in ((1, 16, 64, 128) if b.quick else (1, 16, 32, 64, 128)):
            _attention_case(b, 1, T, ctx, T > 1, "tree")


def bench_accept(b: Bench):
    from specir.backends.triton.kernels import reference as ref
    from specir.backends.triton.kernels.accept import greedy_accept_tree
    from specir.backends.triton.kernels.argmax import argmax

    for B, T in ((1, 64), (32, 64), (1, 128)):
        parents = torch.stack([_random_tree(T, "cuda")[0] for _ in range(B)])
        target = torch.randint(0, 4, (B, T), device="cuda")
        tokens = torch.randint(0, 4, (B, T), device="cuda")
        outs = (torch.empty(B, T, dtype=torch.int32, device="cuda"), torch.empty(B, dtype=torch.int32, device="cuda"),
                torch.empty(B, dtype=torch.int64, device="cuda"))

        def check():
            got, want = greedy_accept_tree(tokens, parents, target), ref.greedy_accept_tree_reference(tokens, parents, target)
            return 0.0 if all(torch.equal(g, w) for g, w in zip(got, want)) else float("inf")
        b.add("greedy_accept", f"B={B} T={T}",
              lambda: greedy_accept_tree(tokens, parents, target, acc_idx=outs[0], n_acc=outs[1], bonus=outs[2]),
              B * T * (8 + 4 + 8 + 4), check=check)
    for M in (1, 64):
        logits = torch.randn(M, VOCAB, device="cuda", dtype=DT)
        idx = torch.empty(M, dtype=torch.int64, device="cuda")
        b.add("argmax", f"M={M} V={VOCAB}", lambda: argmax(logits, out=idx), M * VOCAB * EB,
              check=lambda: 0.0 if torch.equal(argmax(logits), ref.argmax_reference(logits)) else float("inf"),
              torch_fn=lambda: torch.argmax(logits, dim=-1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for triton_kernels.json")
    parser.add_argument("--quick", action="store_true", help="fewer shapes, shorter timing")
    parser.add_argument("--sweep", action="store_true", help="also sweep attention launch configs (slow)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        print("error: needs a CUDA GPU (and TRITON_INTERPRET unset)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    start = time.time()
    b = Bench(args.quick, args.sweep)
    print(f"device {torch.cuda.get_device_name()}  copy bandwidth {b.copy_gbs:.0f} GB/s", flush=True)
    for section in (bench_elementwise, bench_kv_cache, bench_attention, bench_accept):
        section(b)
        torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": __import__("triton").__version__, "copy_gbs": b.copy_gbs, "quick": args.quick,
              "wall_s": round(time.time() - start, 1), "results": b.rows}
    path = os.path.join(args.out, "triton_kernels.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)

    print(f"\n{'kernel':16s} {'shape':34s} {'us':>9s} {'GB/s':>7s} {'%copy':>6s} {'torch us':>9s} {'rel err':>8s}")
    for r in b.rows:
        if "error" in r:
            print(f"{r['kernel']:16s} {r['shape']:34s} ERROR {r['error'][:80]}")
            continue
        torch_us = f"{r['torch_us']:9.2f}" if "torch_us" in r else f"{'':9s}"
        err = r.get("max_rel_err")
        err_s = f"{err:8.1e}" if err is not None and math.isfinite(err) else ("   WRONG" if err is not None else "")
        print(f"{r['kernel']:16s} {r['shape']:34s} {r['us']:9.2f} {r['gbs']:7.0f} {r['pct_copy_bw']:5.0f}% {torch_us} {err_s}")
    print(f"copy bandwidth {b.copy_gbs:.0f} GB/s; wrote {path} in {result['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
