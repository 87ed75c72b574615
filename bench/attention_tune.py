"""Sweep the attention kernel's launch parameters at the 8B pair's batch-1 shapes; write the winners.

    python bench/attention_tune.py --out OUT/attention_tune.json [--budget-s 150]
    python bench/attention_tune.py --apply OUT/attention_tune.json [--min-gain 0.05]

Why: on an H100 (bench/results/gpu-2026-12-07-session28) a depth-10 tree step spends about 0.68 ms in 62
attention launches: about 13 us for each of the target's 32 verify launches (65 queries x 4 per kv head over
about 600 keys: the rule's 1088-key minimum chunk leaves one split, 40 programs on 132 SMs) and about 9 us for
each of the drafter's 8-row level launches, where the K/V they read takes under 1 us at copy bandwidth.

Cases (kernels/attention.py, per-row mode): the target's 65-node tree verify (head_dim 128), the 3-layer
drafter's 8-row tree level (head_dim 64, 56 scratch rows before it) and the target's one-token decode, each at
contexts 256, 512 and 2048 (--contexts). For each: block_m x block_n x num_warps x min_chunk (a runtime argument: no compile of
its own), timed as a CUDA graph of 32 launches over 32 separate caches (a step's layers: L2 never serves the
K/V), each output checked against kernel_reference's attention. "The rule" below is the launch attention_config
chooses now (a listed tile included). A case's score is its mean time ratio to the rule's launch over the contexts;
`--apply` writes a case's best into attention.ATTENTION_TILES when it beats the rule by more than --min-gain and
loses at no context by more than 2 %. Writes JSON; prints a table last.
Other splits sum the softmax partials in another order: outputs move within fp32 rounding, and
`specir bench --check` token-forces what a build emits.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import _checkout  # noqa: F401  (a plain checkout runs too)
import torch
from gemv import time_calls
from tile_table import write_table

LAYERS = 32
CONTEXTS = (256, 512, 2048)  # the shipped workloads' prompts hold 84-353 tokens; serving runs longer
# name: (T, heads, kv heads, head_dim, scratch rows before the new ones, tree mask)
CASES = {"verify 8B tree-65": (65, 32, 8, 128, 0, True),
         "draft 1B-width level 8": (8, 32, 8, 64, 56, True),
         "decode 8B": (1, 32, 8, 128, 0, False)}
MAX_ERR = 2e-2  # largest |out - reference| / max |reference| a launch may give
MAX_LOSS = 1.02  # a winner's largest time ratio to the rule's launch at any one context
CACHE_ROWS = 4096  # a cache's capacity (its split count follows it, as the runtime's does)


def candidates(T: int, G: int, D: int) -> list[dict]:
    """Launch fields to try at T x G queries per kv head (None: the rule's)."""
    from specir.backends.triton.kernels.attention import attention_row_band

    rows = T * G
    block_ms = [bm for bm in (16, 32, 64) if bm <= max(16, attention_row_band(rows))]
    block_ns = (32, 64) if D <= 64 or rows <= 16 else (64,)
    chunks = (None, 64, 128, 256, 512, 1024)
    return [dict(block_m=bm, block_n=bn, num_warps=nw, min_chunk=mc)
            for bm, bn, nw, mc in itertools.product(block_ms, block_ns, (4, 8), chunks)
            if mc is None or mc >= bn]


def make_case(T, H, KH, D, scratch, tree, ctx, seed, layers, dev):
    g = torch.Generator(device=dev).manual_seed(seed)
    S = max(CACHE_ROWS, ctx + scratch + T + 64)
    caches = [(torch.randn(1, KH, S, D, device=dev, generator=g).to(torch.bfloat16),
               torch.randn(1, KH, S, D, device=dev, generator=g).to(torch.bfloat16)) for _ in range(layers)]
    q = torch.randn(1, T, H, D, device=dev, generator=g).to(torch.bfloat16)
    lens = torch.full((1,), ctx, dtype=torch.int32, device=dev)
    offsets = torch.full((1,), scratch, dtype=torch.int32, device=dev) if scratch else None
    mask = None
    if tree:  # each query sees a random subset of the rows before it (its ancestors, in a tree) and itself
        U = scratch + T
        u, t = torch.arange(U, device=dev), torch.arange(T, device=dev)
        mask = (torch.rand(1, T, U, device=dev, generator=g) < 0.15) & (u[None, None, :] < scratch + t[None, :, None])
        mask |= u[None, None, :] == scratch + t[None, :, None]
    return q, caches, lens, offsets, mask


def run_case(name, spec, budget_end, log, dev="cuda", contexts=CONTEXTS, layers=LAYERS, limit=None) -> dict:
    """Every candidate launch of case `name` at each context, timed (CUDA graphs; on a CPU, one eager pass
    under the interpreter: a dry run of the sweep, its times meaningless) and checked."""
    from specir import kernel_reference as ref
    from specir.backends.triton.kernels.attention import MAX_SPLITS, attention, attention_config

    T, H, KH, D, scratch, tree = spec
    G = H // KH
    out = {"case": name, "T": T, "heads": H, "kv_heads": KH, "head_dim": D, "scratch": scratch, "contexts": {}}
    for ctx in contexts:
        q, caches, lens, offsets, mask = make_case(T, H, KH, D, scratch, tree, ctx, ctx, layers, dev)
        S = caches[0][0].shape[2]
        work = torch.empty(T * H * MAX_SPLITS * (D + 1), dtype=torch.float32, device=dev)
        outs = [torch.empty_like(q) for _ in range(layers)]
        want = ref.attention_reference(q, caches[0][0], caches[0][1], lens, mask, offsets=offsets)
        scale = want.float().abs().max().item()
        rule = attention_config(1, T, H, KH, D, S, q.device)
        rows = []
        first = rule_fields(rule)  # the rule's launch first: every ratio is to it
        plain = untiled_fields(T, H, KH, D, S, q.device)  # with a tile listed, the launch without it stays a candidate
        tried = [first, *([plain] if plain != dict(first, min_chunk=rule["min_chunk"]) else [])]
        for fields in [*tried, *[f for f in candidates(T, G, D) if f not in tried]][:limit]:
            if time.time() > budget_end:
                log(f"  {name} ctx {ctx}: budget spent after {len(rows)} launches")
                break
            over = {k: v for k, v in fields.items() if v is not None}

            def call(i, over=over):
                return lambda: attention(q, *caches[i], lens, mask, out=outs[i], workspace=work, offsets=offsets, **over)
            try:
                got = attention(q, *caches[0], lens, mask, offsets=offsets, **over)
                err = (got.float() - want.float()).abs().max().item() / scale
                us = _time([call(i) for i in range(layers)], dev) * 1e6
            except Exception as e:  # a tile the kernel cannot take (registers, shared memory): skipped
                log(f"  {name} ctx {ctx} {fields}: {type(e).__name__}: {str(e)[:120]}")
                continue
            cfg = attention_config(1, T, H, KH, D, S, q.device, **over)
            rows.append({"fields": fields, "us": us, "err": err, "ok": err <= MAX_ERR,
                         "num_splits": cfg["num_splits"], "min_chunk": cfg["min_chunk"]})
        out["contexts"][ctx] = {"rule": {k: rule[k] for k in ("block_m", "block_n", "num_warps", "min_chunk",
                                                              "num_splits")}, "launches": rows}
        default = next((r for r in rows if r["fields"] == first), None)
        best = min((r for r in rows if r["ok"]), key=lambda r: r["us"], default=None)
        if default and best:
            log(f"  {name} ctx {ctx}: rule {default['us']:.2f} us -> best {best['us']:.2f} us with {best['fields']}")
    return out


def _time(calls, dev) -> float:
    if dev == "cuda":
        return time_calls(calls)
    t0 = time.perf_counter()
    for c in calls:
        c()
    return (time.perf_counter() - t0) / len(calls)


def rule_fields(rule: dict) -> dict:
    """The candidate fields that launch as the rule does (min_chunk None: the rule's)."""
    return dict(block_m=rule["block_m"], block_n=rule["block_n"], num_warps=rule["num_warps"], min_chunk=None)


def untiled_fields(T, H, KH, D, S, device) -> dict:
    """The fields of the launch attention_config chose with no ATTENTION_TILES entry (min_chunk stated)."""
    from specir.backends.triton.kernels import attention

    listed, attention.ATTENTION_TILES = attention.ATTENTION_TILES, {}
    try:
        cfg = attention.attention_config(1, T, H, KH, D, S, device)
    finally:
        attention.ATTENTION_TILES = listed
    return dict(block_m=cfg["block_m"], block_n=cfg["block_n"], num_warps=cfg["num_warps"], min_chunk=cfg["min_chunk"])


def choose_best(entry: dict) -> dict | None:
    """Among the fields that ran at every context with every output within MAX_ERR and lose to the rule's launch
    by at most MAX_LOSS at each, those with the lowest mean time ratio to it, with that ratio and the worst
    context's; None without the rule's launch at every context."""
    ratios: dict[str, list[float]] = {}
    for ctx, c in entry["contexts"].items():
        default = next((r for r in c["launches"] if r["fields"] == rule_fields(c["rule"])), None)
        if default is None:
            return None
        for r in c["launches"]:
            if r["ok"]:
                ratios.setdefault(json.dumps(r["fields"], sort_keys=True), []).append(r["us"] / default["us"])
    full = {k: v for k, v in ratios.items() if len(v) == len(entry["contexts"]) and max(v) <= MAX_LOSS}
    if not full:
        return None
    key = min(full, key=lambda k: sum(full[k]) / len(full[k]))
    return {"fields": json.loads(key), "mean_ratio": sum(full[key]) / len(full[key]), "worst_ratio": max(full[key])}


def table_entries(entries: list[dict], min_gain: float) -> dict:
    """{(row band, head_dim): fields} for each case whose best beats the rule by min_gain and loses nowhere."""
    from specir.backends.triton.kernels.attention import attention_row_band

    out = {}
    for e in entries:
        best = choose_best(e)
        if best and best["mean_ratio"] < 1 - min_gain:
            rows = e["T"] * (e["heads"] // e["kv_heads"])
            ran = next(r for r in next(iter(e["contexts"].values()))["launches"] if r["fields"] == best["fields"])
            fields = dict(best["fields"], min_chunk=ran["min_chunk"])  # the chunk it launched with (shapes alone fix it)
            out[(attention_row_band(rows), e["head_dim"])] = dict(sorted(fields.items()))
    return out


def apply(path: Path, min_gain: float, source: Path | None = None) -> int:
    """Rewrite ATTENTION_TILES in `source` (attention.py) with a tuning JSON's winners (other entries kept)."""
    from specir.backends.triton.kernels import attention

    found = table_entries(json.loads(path.read_text())["cases"], min_gain)
    source = source or Path(attention.__file__)
    if not found:
        print(f"no launch beat the rule by more than {min_gain:.0%}; {source} unchanged")
        return 0
    return write_table(source, "ATTENTION_TILES", "tuple[int, int]", "ATTENTION_FIELDS", attention.ATTENTION_TILES,
                       found)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="a .json file")
    ap.add_argument("--apply", type=Path, help="write a measured JSON's winners into attention.ATTENTION_TILES")
    ap.add_argument("--min-gain", type=float, default=0.05)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    ap.add_argument("--contexts", default=",".join(map(str, CONTEXTS)), help="cached keys before the new rows")
    ap.add_argument("--budget-s", type=float, default=150.0, help="stop sweeping after this long (what ran is kept)")
    args = ap.parse_args(argv)
    if args.apply:
        return apply(args.apply, args.min_gain)
    if not args.out:
        ap.error("--out or --apply")
    if not torch.cuda.is_available():
        print("bench/attention_tune.py needs a CUDA GPU", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    start = time.time()
    data = {"device": torch.cuda.get_device_name(), "layers": LAYERS, "max_err": MAX_ERR, "cases": []}
    for i, name in enumerate(names):  # each case gets an equal share of what is left
        end = time.time() + (args.budget_s - (time.time() - start)) / (len(names) - i)
        data["cases"].append(run_case(name, CASES[name], end, lambda m: print(m, flush=True),
                                      contexts=tuple(int(c) for c in args.contexts.split(","))))
        Path(args.out).write_text(json.dumps(data, indent=1))
    data["seconds"] = time.time() - start
    Path(args.out).write_text(json.dumps(data, indent=1))
    print(f"\nattention launches, {LAYERS} per graph, on {data['device']}: us per launch, the rule's and the best's")
    print("| case | context | rule (chunk, splits) | rule us | best us | best fields |")
    print("|---|---:|---|---:|---:|---|")
    for e in data["cases"]:
        best = choose_best(e)
        for ctx, c in e["contexts"].items():
            by = {json.dumps(r["fields"], sort_keys=True): r for r in c["launches"]}
            rule = by.get(json.dumps(rule_fields(c["rule"]), sort_keys=True))
            mine = by.get(json.dumps(best["fields"], sort_keys=True)) if best else None
            print(f"| {e['case']} | {ctx} | {c['rule']['min_chunk']}, {c['rule']['num_splits']} | "
                  f"{rule['us'] if rule else float('nan'):.2f} | {mine['us'] if mine else float('nan'):.2f} | "
                  f"{best['fields'] if best else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
