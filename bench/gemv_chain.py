"""A decode step's linears back to back: launch overlap (kernels/launch_overlap.py) against plain launches.

    python bench/gemv_chain.py --out OUT [--layers 32] [--iters 0,4] [--bf12-layers 8] [--bf12-iters 4]
                               [--bf12-maxnreg 128] [--variant bf12:weight_cache=cg,maxnreg=128 ...]
                               [--attention 512 [--o-iters 0,4,8]]

The chain is the Llama-3.1-8B decoder layer's four GEMVs as the `norm_linear` + `swiglu_linear`
fusions launch them (qkv 6144x4096 with the input norm in its prologue, o 4096x4096 with the residual
add in its epilogue, gate|up 28672x4096 with the post-attention norm, down 4096x14336 with the SwiGLU
in its prologue and the residual add), `--layers` layers of distinct weights (bf16: 436 MB a layer,
so L2 never holds the next matrix), each launch reading what the one before it wrote. Attention and
rope are left out: the chain times the GEMVs and the gaps between them. With `--attention CTX` each layer's
decode attention over CTX cached keys (random K/V, the 8B's 32/8 heads x 128) runs between qkv and o, and
o reads its output; `--o-iters` then adds overlapped variants in which the attention lets the o projection
start at once (attention's lets_next_start; also with the attention itself overlapped) and o prefetches that many K iterations into L2 while it runs.

Variants, each a CUDA graph of the whole chain, replayed (median): plain launches; overlapped with
the first `--iters` (0, 4 ...) K iterations of each program's weights prefetched into L2 before its wait
(`LinearConfig.overlap_iters`); the same for BF12 weights over `--bf12-layers` layers. Every
`--variant FMT:FIELD=VALUE,...` (repeatable) times the plain chain of format FMT with those
order-neutral `LinearConfig` fields replaced (e.g. `bf12:weight_cache=cg`). Every
variant's output bits are checked against the plain chain of its format. Bytes: the weights in
their format; GB/s against the measured copy bandwidth. Writes OUT/gemv_chain.json, prints a table.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemv import copy_bandwidth, graph_timer, parse_variant  # noqa: E402

HIDDEN, INTER, QKV = 4096, 14336, 6144
EPS = 1e-5


def _layers(count: int, packed: bool, seed: int):
    from specir.bf12 import pack
    g = torch.Generator(device="cuda").manual_seed(seed)
    layers = []
    for _ in range(count):
        mats = [(torch.randn(n, k, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
                for n, k in ((QKV, HIDDEN), (HIDDEN, HIDDEN), (2 * INTER, HIDDEN), (HIDDEN, INTER))]
        if packed:
            mats = [pack(w) for w in mats]
        norms = [(torch.rand(HIDDEN, device="cuda", generator=g) + 0.5).to(torch.bfloat16) for _ in range(2)]
        layers.append((mats, norms))
    return layers


def _nbytes(m) -> int:
    if isinstance(m, torch.Tensor):
        return m.numel() * m.element_size()
    return sum(t.numel() * t.element_size() for t in (m.mant, m.code, m.base, m.esc, m.raw))


HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128


def _caches(count: int, ctx: int, seed: int, capacity: int = 2432):
    """Per layer a random K and V cache (room for `capacity` keys, as gpu_bench's sessions: the split count
    follows it), and lens = ctx."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    caches = [tuple((torch.randn(1, KV_HEADS, max(capacity, ctx + 1), HEAD_DIM, device="cuda", generator=g))
                    .to(torch.bfloat16) for _ in range(2)) for _ in range(count)]
    return caches, torch.full((1,), ctx, dtype=torch.int32, device="cuda")


def _chain_calls(layers, h, overlap: bool, iters: int, fields: dict | None = None, attention=None,
                 o_iters: int | None = None, lets_next_start: bool = False, attention_overlapped: bool = False):
    """The chain as zero-argument calls writing preallocated buffers; returns (calls, output). With `attention`
    (`_caches`' result) each layer's attention runs between qkv and o (`lets_next_start`, `attention_overlapped`: its
    launch overlap, kernels/attention.py); `o_iters` replaces o's overlap_iters."""
    from specir.backends.triton.kernels.attention import attention as attend
    from specir.backends.triton.kernels.linear import linear_bf12, linear_bf16
    from specir.backends.triton.kernels.linear_config import choose
    calls = []
    att = torch.empty(1, 1, HEADS, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
    qkv = torch.empty(1, QKV, dtype=torch.bfloat16, device="cuda")
    gu = torch.empty(1, 2 * INTER, dtype=torch.bfloat16, device="cuda")
    cur = h
    for i, (mats, (n1, n2)) in enumerate(layers):
        packed = not isinstance(mats[0], torch.Tensor)
        linear, fmt = (linear_bf12, "bf12") if packed else (linear_bf16, "bf16")

        def cfg(m, fmt=fmt, it=iters):
            n, k = m.shape
            return replace(choose(1, n, k, fmt), overlap_iters=it, **(fields or {}))
        mid, nxt = (torch.empty(1, HIDDEN, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        o_in = qkv[:, :HIDDEN]
        calls.append(lambda x=cur, m=mats[0], w=n1, c=cfg(mats[0]), f=linear: f(x, m, norm=(w, EPS), out=qkv,
                                                                             overlap=overlap, config=c))
        if attention is not None:
            (k_cache, v_cache), lens = attention[0][i], attention[1]
            calls.append(lambda k=k_cache, v=v_cache, n=lens: attend(
                qkv[:, :HIDDEN].view(1, 1, HEADS, HEAD_DIM), k, v, n, out=att, lets_next_start=lets_next_start,
                overlapped=attention_overlapped))
            o_in = att.view(1, HIDDEN)
        calls += [
            lambda x=cur, m=mats[1], o=mid, c=cfg(mats[1], it=iters if o_iters is None else o_iters), f=linear, a=o_in:
                f(a, m, residual=x, out=o, overlap=overlap, config=c),
            lambda m=mats[2], w=n2, x=mid, c=cfg(mats[2]), f=linear: f(x, m, norm=(w, EPS), out=gu, overlap=overlap,
                                                                          config=c),
            lambda m=mats[3], x=mid, o=nxt, c=cfg(mats[3]), f=linear: f(gu[:, :INTER], m, up=gu[:, INTER:], residual=x,
                                                                out=o, overlap=overlap, config=c),
        ]
        cur = nxt
    return calls, cur


def _o_iters(text: str, fmt: str) -> int:
    """--o-iters' value: a count, or 'all' (the o projection's whole K range: linear_config.prefetching_its_range)."""
    from specir.backends.triton.kernels.linear_config import choose, prefetching_its_range
    if text != "all":
        return int(text)
    return prefetching_its_range(choose(1, HIDDEN, HIDDEN, fmt), HIDDEN).overlap_iters


def run_variant(layers, h0, overlap: bool, iters: int, replays: int, fields: dict | None = None, attention=None,
                o_iters: int | None = None, attention_lets_next_start: bool = False, attention_overlapped: bool = False):
    calls, out = _chain_calls(layers, h0, overlap, iters, fields, attention, o_iters, attention_lets_next_start,
                              attention_overlapped)
    # replays change nothing: every launch reads h0 (never written) or the chain's own outputs; the o
    # projection reads qkv[:, :4096] (a 4096-wide stand-in for attention's output) or the attention's output
    seconds = graph_timer(calls, replays)()
    return seconds, out.clone()


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--bf12-layers", type=int, default=8)
    ap.add_argument("--iters", default="0,4", help="overlap_iters values to time (bf16)")
    ap.add_argument("--bf12-iters", default="4", help="overlap_iters values to time (BF12)")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--bf12-maxnreg", type=int, default=0,
                    help="also time BF12 plain with this register cap (order-neutral; its prologue GEMVs take 168)")
    ap.add_argument("--variant", action="append", default=[], metavar="FMT:FIELD=VALUE,...",
                    help="also time FMT's plain chain with these order-neutral LinearConfig fields (repeatable)")
    ap.add_argument("--attention", type=int, default=0, metavar="CTX",
                    help="run each layer's decode attention over CTX cached keys between qkv and o")
    ap.add_argument("--o-iters", default="", help="with --attention: overlapped variants in which the attention lets "
                                                  "o start at once and o prefetches this many K iterations (each, "
                                                  "comma-separated; 'all': its whole range, as attention_prefetch does)")
    a = ap.parse_args(argv)
    if a.o_iters and not a.attention:
        ap.error("--o-iters needs --attention")
    extra = [parse_variant(v) for v in a.variant]
    if a.bf12_maxnreg:
        extra.append(("bf12", {"maxnreg": a.bf12_maxnreg}))
    copy_gbps = copy_bandwidth()
    print(f"copy bandwidth {copy_gbps:.0f} GB/s", flush=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    h0 = (torch.randn(1, HIDDEN, device="cuda", generator=g)).to(torch.bfloat16)
    rows = []
    for fmt, count in (("bf16", a.layers), ("bf12", a.bf12_layers)):
        if count <= 0:
            continue
        layers = _layers(count, fmt == "bf12", seed=7)
        att = _caches(count, a.attention, seed=11) if a.attention else None
        nbytes = sum(_nbytes(m) for mats, _ in layers for m in mats)
        nbytes += 2 * count * KV_HEADS * HEAD_DIM * 2 * (a.attention + 1) if att else 0   # the K/V read
        base_s, base_out = run_variant(layers, h0, False, 0, a.replays, attention=att)
        print(f"{fmt} plain: {base_s * 1e3:.3f} ms", flush=True)
        variants = [("plain", base_s, True)]
        for it in [int(v) for v in (a.iters if fmt == "bf16" else a.bf12_iters).split(",") if v != ""]:
            s, out = run_variant(layers, h0, True, it, a.replays, attention=att)
            variants.append((f"overlap, {it} iterations prefetched", s, _same_bits(out, base_out)))
            print(f"{fmt} overlap {it}: {s * 1e3:.3f} ms, bits equal {variants[-1][2]}", flush=True)
        for it in [_o_iters(v, fmt) for v in a.o_iters.split(",") if v != ""] if att else ():
            s, out = run_variant(layers, h0, True, 0, a.replays, attention=att, o_iters=it,
                                 attention_lets_next_start=True)
            variants.append((f"overlap, attention lets o start, o prefetches {it}", s, _same_bits(out, base_out)))
            print(f"{fmt} {variants[-1][0]}: {s * 1e3:.3f} ms, bits equal {variants[-1][2]}", flush=True)
            s, out = run_variant(layers, h0, True, 0, a.replays, attention=att, o_iters=it,
                                 attention_lets_next_start=True, attention_overlapped=True)
            variants.append((f"the same, attention overlapped too, o prefetches {it}", s, _same_bits(out, base_out)))
            print(f"{fmt} {variants[-1][0]}: {s * 1e3:.3f} ms, bits equal {variants[-1][2]}", flush=True)
        for vfmt, fields in extra:
            if vfmt != fmt:
                continue
            label = "plain, " + ", ".join(f"{k}={v}" for k, v in fields.items())
            s, out = run_variant(layers, h0, False, 0, a.replays, fields, attention=att)
            variants.append((label, s, _same_bits(out, base_out)))
            print(f"{fmt} {label}: {s * 1e3:.3f} ms, bits equal {variants[-1][2]}", flush=True)
        for name, s, same in variants:
            rows.append({"format": fmt, "layers": count, "variant": name, "ms": s * 1e3,
                         "ms_per_layer": s * 1e3 / count, "GBps": nbytes / s / 1e9,
                         "of_copy": nbytes / s / 1e9 / copy_gbps, "bits_equal_plain": same,
                         "launches": (5 if att else 4) * count, "bytes": nbytes, "attention_context": a.attention})
        del layers
        torch.cuda.empty_cache()
    out = Path(a.out)
    path = out if out.suffix == ".json" else out / "gemv_chain.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device": torch.cuda.get_device_name(), "copy_GBps": copy_gbps, "rows": rows},
                               indent=1))
    print(f"device {torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s")
    print("| format | variant | ms/layer | GB/s | of copy | bits = plain |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['format']} | {r['variant']} | {r['ms_per_layer']:.4f} | {r['GBps']:.0f} | {r['of_copy']:.3f} | "
              f"{r['bits_equal_plain']} |")
    return 0 if all(r["bits_equal_plain"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
