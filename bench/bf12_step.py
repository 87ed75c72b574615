"""One autoregressive step at the Llama-3.1-8B shape with bf16 vs BF12 weights (Triton kernels).

    python bench/bf12_step.py --out DIR [--context 512] [--replays 20] [--std 0.02]

- weights: random N(0, std) bf16 at the exact 8B shapes, made on the GPU (no checkpoint), with
  q|k|v and gate|up concatenated as the Triton executor groups them; BF12 copies packed on the
  GPU (`specir.bf12.pack`, time reported);
- the step, batch 1, one token, 32 layers: rms_norm, QKV GEMV, rope + KV-cache write, attention
  over `--context` cached tokens, o_proj GEMV, add + rms_norm, gate|up GEMV, SwiGLU, down GEMV,
  residual; final add + rms_norm and the lm_head GEMV (the embedding row is a fixed input).
  Only the linear kernels differ between the formats (`linear_bf16` vs `linear_bf12`, one launch
  configuration per shape);
- "step" times all of it, "gemvs" only the GEMVs in sequence; each is one CUDA graph, replayed;
  median ms per step, weight bytes read, GB/s and % of the measured copy bandwidth, the roofline
  (bytes / copy bandwidth) and the BF12 speedup (target >= 1.2x);
- correctness: the logits (and hidden state) of the bf16 and BF12 steps are compared bit for bit.
Writes DIR/bf12_step.json and prints a markdown table last. `--shape tiny --device cpu` under
TRITON_INTERPRET=1 runs every code path without a GPU (tests/bf12_pipeline smoke test).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

import gemv  # bench/, beside this script: CUDA-graph timing, copy bandwidth


@dataclass(frozen=True)
class StepShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    eps: float = 1e-5
    rope_theta: float = 500000.0


SHAPES = {
    "llama-3.1-8b": StepShape(4096, 32, 32, 8, 128, 14336, 128256),
    "tiny": StepShape(128, 1, 2, 1, 64, 256, 160),
}


def matrix_shapes(s: StepShape) -> dict[str, tuple[int, int]]:
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    return {"qkv": (q + 2 * kv, s.hidden), "o": (s.hidden, q), "gate_up": (2 * s.inter, s.hidden),
            "down": (s.hidden, s.inter)}


def make_weights(s: StepShape, device, std: float, seed: int, raw_rows: int = 0) -> dict:
    """{"layers": [{name: bf16 matrix or norm weight}], "final_norm", "lm_head"}, Gaussian; the
    first `raw_rows` rows of every matrix get two exponent outliers (2^-60 and 2^8), which BF12
    can only keep as raw bf16 rows (its second launch)."""
    g = torch.Generator(device=device).manual_seed(seed)

    def gauss(n, k):
        out = torch.empty(n, k, dtype=torch.bfloat16, device=device)
        step = max(1, (1 << 26) // k)
        for i in range(0, n, step):  # bounded fp32 temporaries
            rows = out[i:i + step]
            rows.copy_(torch.randn(rows.shape, generator=g, device=device) * std)
        out[:raw_rows, 0] = 2.0 ** -60
        out[:raw_rows, 1] = 2.0 ** 8
        return out

    def norm():
        return (1.0 + 0.1 * torch.randn(s.hidden, generator=g, device=device)).to(torch.bfloat16)

    layers = []
    for _ in range(s.layers):
        layer = {name: gauss(n, k) for name, (n, k) in matrix_shapes(s).items()}
        layer.update(in_norm=norm(), post_norm=norm())
        layers.append(layer)
    return {"layers": layers, "final_norm": norm(), "lm_head": gauss(s.vocab, s.hidden)}


def pack_weights(weights: dict) -> dict:
    """The same structure with every matrix as a BF12Matrix (packed on its device)."""
    from specir.bf12 import pack
    pk = lambda t: pack(t) if t.dim() == 2 else t  # noqa: E731
    return {"layers": [{n: pk(t) for n, t in layer.items()} for layer in weights["layers"]],
            "final_norm": weights["final_norm"], "lm_head": pack(weights["lm_head"])}


def weight_bytes(weights: dict) -> int:
    def size(t):
        return t.nbytes() if hasattr(t, "raw_rows") else t.numel() * t.element_size()
    return sum(size(t) for layer in weights["layers"] for t in layer.values()) + \
        size(weights["final_norm"]) + size(weights["lm_head"])


class Step:
    """Every launch of one AR step bound to preallocated buffers (capturable in a CUDA graph).
    `fmt` picks the linear kernel; `gemvs_only` leaves out everything but the GEMVs; `fields` replaces
    order-neutral GEMV config fields (bench/gemv.py parse_variant), so the bits stay the plain step's."""

    def __init__(self, s: StepShape, weights: dict, fmt: str, context: int, h0: torch.Tensor,
                 cache_seed: int, gemvs_only: bool = False, fields: dict | None = None):
        from specir.backends.triton.forward import linear_config
        from specir.backends.triton.kernels.attention import attention_config, attention_workspace
        from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
        self.s, self.w, self.fmt, self.gemvs_only = s, weights, fmt, gemvs_only
        dev, bf = h0.device, torch.bfloat16
        q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
        self.h0 = h0
        self.h = torch.empty(1, 1, s.hidden, dtype=bf, device=dev)
        self.xn = torch.empty_like(self.h)
        self.qkv = torch.empty(1, 1, q + 2 * kv, dtype=bf, device=dev)
        self.q_rot = torch.empty(1, 1, s.heads, s.head_dim, dtype=bf, device=dev)
        self.attn = torch.empty(1, 1, s.heads, s.head_dim, dtype=bf, device=dev)
        self.o = torch.empty_like(self.h)
        self.gate_up = torch.empty(1, 1, 2 * s.inter, dtype=bf, device=dev)
        self.act = torch.empty(1, 1, s.inter, dtype=bf, device=dev)
        self.d = torch.empty_like(self.h)
        self.logits = torch.empty(1, 1, s.vocab, dtype=bf, device=dev)
        g = torch.Generator(device=dev).manual_seed(cache_seed)
        shape = (s.layers, 1, s.kv_heads, context + 1, s.head_dim)
        self.k_cache = torch.randn(shape, generator=g, device=dev).to(bf)
        self.v_cache = torch.randn(shape, generator=g, device=dev).to(bf)
        if gemvs_only:  # inputs of the GEMVs whose producers are left out: fixed random values
            self.attn.copy_(torch.randn(self.attn.shape, generator=g, device=dev))
            self.act.copy_(torch.randn(self.act.shape, generator=g, device=dev))
        self.lens = torch.full((1,), context, dtype=torch.int32, device=dev)
        self.pos = torch.full((1, 1), context, dtype=torch.long, device=dev)
        self.inv_freq = 1.0 / s.rope_theta ** (torch.arange(0, s.head_dim, 2, device=dev).float() / s.head_dim)
        self.att_cfg = attention_config(1, 1, s.heads, s.kv_heads, s.head_dim, context + 1, dev)
        self.workspace = attention_workspace(1, 1, s.heads, s.head_dim, self.att_cfg["num_splits"], dev)
        kernel = linear_bf12 if fmt == "bf12" else linear_bf16

        def linear(x, w, out):
            n, k = w.shape
            cfg = replace(linear_config(1, n, k, fmt), **(fields or {}))
            return lambda: kernel(x, w, out=out, config=cfg)
        self.linears = []
        for layer in weights["layers"]:
            self.linears.append((linear(self.xn, layer["qkv"], self.qkv),
                                 linear(self.attn.view(1, 1, q), layer["o"], self.o),
                                 linear(self.xn, layer["gate_up"], self.gate_up),
                                 linear(self.act, layer["down"], self.d)))
        self.head = linear(self.xn, weights["lm_head"], self.logits)

    def run(self) -> torch.Tensor:
        from specir.backends.triton.kernels.activation import silu_mul
        from specir.backends.triton.kernels.attention import attention
        from specir.backends.triton.kernels.norm import add_rms_norm, rms_norm
        from specir.backends.triton.kernels.rope import rope_kv_write
        s, w, full = self.s, self.w, not self.gemvs_only
        q, kv, hd = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.head_dim
        self.h.copy_(self.h0)
        if not full:
            self.xn.copy_(self.h0)
        for i, (qkv, o, gate_up, down) in enumerate(self.linears):
            layer = w["layers"][i]
            if full:
                if i == 0:
                    rms_norm(self.h, layer["in_norm"], s.eps, out=self.xn)
                else:
                    add_rms_norm(self.d, self.h, layer["in_norm"], s.eps, out=self.xn, residual_out=self.h)
            qkv()
            if full:
                qv, kv_, vv = (self.qkv[..., a:b].unflatten(-1, (-1, hd)) for a, b in
                               ((0, q), (q, q + kv), (q + kv, q + 2 * kv)))
                rope_kv_write(qv, kv_, vv, self.pos, self.inv_freq, self.k_cache[i], self.v_cache[i], self.lens,
                              q_out=self.q_rot)
                attention(self.q_rot, self.k_cache[i], self.v_cache[i], self.lens, out=self.attn,
                          workspace=self.workspace, num_splits=self.att_cfg["num_splits"])
            o()
            if full:
                add_rms_norm(self.o, self.h, layer["post_norm"], s.eps, out=self.xn, residual_out=self.h)
            gate_up()
            if full:
                silu_mul(self.gate_up, out=self.act)
            down()
        if full:
            add_rms_norm(self.d, self.h, w["final_norm"], s.eps, out=self.xn, residual_out=self.h)
        self.head()
        return self.logits


def wall_timer(calls, replays: int):
    """CPU (interpreter) stand-in for gemv.graph_timer: wall time of `replays` plain runs of `calls`."""
    def measure() -> float:
        start = time.perf_counter()
        for _ in range(replays):
            for c in calls:
                c()
        return (time.perf_counter() - start) / replays
    return measure


def copy_bandwidth(device) -> float | None:
    return gemv.copy_bandwidth() if device.type == "cuda" else None


def run(shape: StepShape, *, device="cuda", context: int = 512, replays: int = 20, rounds: int = 3,
        std: float = 0.02, seed: int = 0, raw_rows: int = 0, variants: dict | None = None, log=print) -> dict:
    """`variants`: {fmt: order-neutral GEMV config fields} applied to that format's launches."""
    from specir.bf12 import bits_per_weight
    device = torch.device(device)
    t0 = time.perf_counter()
    copy_gbps = copy_bandwidth(device)
    weights16 = make_weights(shape, device, std, seed, raw_rows)
    log(f"weights: {weight_bytes(weights16) / 1e9:.3f} GB bf16 made in {time.perf_counter() - t0:.1f} s")
    t1 = time.perf_counter()
    weights12 = pack_weights(weights16)
    if device.type == "cuda":
        torch.cuda.synchronize()
    pack_s = time.perf_counter() - t1
    mats = [m for layer in weights12["layers"] for m in layer.values() if hasattr(m, "raw_rows")]
    mats.append(weights12["lm_head"])
    numel = sum(m.shape[0] * m.shape[1] for m in mats)
    bits = sum(bits_per_weight(m) * m.shape[0] * m.shape[1] for m in mats) / numel
    raw_rows = sum(m.raw_row_count for m in mats)
    log(f"packed {len(mats)} matrices on {device.type} in {pack_s:.1f} s: {bits:.4f} bits/weight, {raw_rows} raw rows")

    h0 = (torch.randn(1, 1, shape.hidden, generator=torch.Generator(device=device).manual_seed(seed + 1),
                      device=device)).to(torch.bfloat16)
    kv_bytes = 2 * shape.layers * shape.kv_heads * (context + 1) * shape.head_dim * 2
    bytes_of = {"bf16": weight_bytes(weights16), "bf12": weight_bytes(weights12)}
    results, checks = [], {}
    timer = gemv.graph_timer if device.type == "cuda" else wall_timer
    for variant in ("step", "gemvs"):
        steps = {fmt: Step(shape, w, fmt, context, h0, seed + 2, gemvs_only=variant == "gemvs",
                           fields=(variants or {}).get(fmt))
                 for fmt, w in (("bf16", weights16), ("bf12", weights12))}
        outs = {fmt: (st.run().clone(), st.h.clone()) for fmt, st in steps.items()}
        equal = all(torch.equal(a.view(torch.int16), b.view(torch.int16))
                    for a, b in zip(outs["bf16"], outs["bf12"]))
        finite = bool(torch.isfinite(outs["bf16"][0].float()).all())
        checks[variant] = {"bitwise_equal": equal, "finite_logits": finite}
        log(f"{variant}: bf16 and BF12 outputs bitwise equal: {equal} (finite: {finite})")
        measures = {fmt: timer([st.run], replays) for fmt, st in steps.items()}
        samples = {fmt: [] for fmt in steps}
        for _ in range(rounds):  # alternate, so both formats see the same clocks
            for fmt, m in measures.items():
                samples[fmt].append(m())
        for fmt in steps:
            sec = statistics.median(samples[fmt])
            read = bytes_of[fmt] + (kv_bytes if variant == "step" else 0)
            row = {"variant": variant, "format": fmt, "ms": sec * 1e3, "weight_gb": bytes_of[fmt] / 1e9,
                   "read_gb": read / 1e9, "gbps": read / sec / 1e9}
            if copy_gbps:
                row.update(pct_copy=100 * row["gbps"] / copy_gbps, roofline_ms=read / (copy_gbps * 1e9) * 1e3)
                row["x_roofline"] = row["ms"] / row["roofline_ms"]
            results.append(row)
        by = {r["format"]: r for r in results if r["variant"] == variant}
        by["bf12"]["speedup"] = by["bf16"]["ms"] / by["bf12"]["ms"]
        del steps, outs
    return {"shape": asdict(shape), "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "context": context, "variants": variants or {}, "std": std, "copy_gbps": copy_gbps, "pack_seconds": pack_s,
            "bits_per_weight": bits, "raw_rows": raw_rows, "checks": checks, "results": results,
            "seconds": time.perf_counter() - t0}


def table(result: dict) -> str:
    lines = [f"BF12 vs bf16, one AR step (batch 1), {result['device']}, context {result['context']}, "
             f"copy bandwidth {result['copy_gbps'] or float('nan'):.0f} GB/s; BF12 {result['bits_per_weight']:.4f} "
             f"bits/weight, packed in {result['pack_seconds']:.1f} s; GEMV fields {result['variants'] or 'as chosen'}",
             "", "| variant | format | ms | GB read | GB/s | % copy bw | x roofline | speedup | bit-equal |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        pct = f"{r['pct_copy']:.1f}" if "pct_copy" in r else "-"
        xr = f"{r['x_roofline']:.3f}" if "x_roofline" in r else "-"
        sp = f"**{r['speedup']:.3f}x**" if "speedup" in r else ""
        eq = "yes" if result["checks"][r["variant"]]["bitwise_equal"] else "NO"
        lines.append(f"| {r['variant']} | {r['format']} | {r['ms']:.3f} | {r['read_gb']:.3f} | {r['gbps']:.0f} | "
                     f"{pct} | {xr} | {sp} | {eq} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for bf12_step.json")
    p.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.1-8b")
    p.add_argument("--device", default="cuda")
    p.add_argument("--context", type=int, default=512, help="cached tokens attended over")
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--std", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--raw-rows", type=int, default=0, help="plant this many raw (unpackable) rows per matrix")
    p.add_argument("--variant", action="append", default=[], metavar="FMT:FIELD=VALUE,...",
                   help="order-neutral GEMV config fields for FMT's launches, e.g. bf12:maxnreg=128 (repeatable)")
    args = p.parse_args(argv)
    variants = {}
    for text in args.variant:
        fmt, fields = gemv.parse_variant(text)
        variants.setdefault(fmt, {}).update(fields)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bf12_step: no GPU here (use --shape tiny --device cpu with TRITON_INTERPRET=1 for a smoke run)",
              file=sys.stderr)
        return 2
    result = run(SHAPES[args.shape], device=args.device, context=args.context, replays=args.replays,
                 rounds=args.rounds, std=args.std, seed=args.seed, raw_rows=args.raw_rows,
                 variants=variants, log=lambda m: print(m, file=sys.stderr))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bf12_step.json").write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    ok = all(c["bitwise_equal"] and c["finite_logits"] for c in result["checks"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
