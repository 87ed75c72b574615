"""Per-launch time of the recurrent tree kernels at a production hybrid shape, by variant.

    python bench/recurrent_tree_kernels.py [--nodes 64] [--out FILE.json]

One layer of Qwen3.5-9B's Gated DeltaNet (Hk 16, Hv 32, Dk = Dv 128; conv over 8192 channels,
K = 4) for one request over a random tree of --nodes nodes (node t's parent drawn from 0 .. t-1,
as bench/hybrid_bench.py draws them), the state ring holding every node:
- conv1d: the walk over the tokens vs PATHS (one program per node), checked bit-equal;
- gated delta: the path replay (PATHS) with block_v / num_warps variants, and without writing
  node states (what a replay-from-inputs commit needs), checked bit-equal in outputs at each
  configuration (configurations reduce in different orders, so they differ by fp32 rounding);
- gated delta in the WY form (gated_delta_wy.py: the tree at once with matrix products, node
  factors kept instead of states) by block_v / num_warps / dot precision, its outputs against
  PATHS (relative error), and the commit that rebuilds one node's state from the factors;
- for scale: the decode step (one token) of each.
Times are CUDA-graph replays (median of 5 x 50). A CPU run (TRITON_INTERPRET=1) only checks.
"""
import argparse
import json
import sys

import _checkout  # noqa: F401
import torch

from specir.backends.triton.kernels.conv1d import conv1d_tree
from specir.backends.triton.kernels.gated_delta import gated_delta_rule_tree
from specir.ir.ops_recurrent import StateSpec
from specir.runtime.recurrent_state import RecurrentStates
from timing import replay_us

HK, HV, DK, DV, K = 16, 32, 128, 128, 4
C = 2 * HK * DK + HV * DV


def parents_of(n: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.tensor([[-1] + [int(torch.randint(0, t, (1,), generator=gen)) for t in range(1, n)]])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--out", default="")
    ap.add_argument("--precisions", default="tf32x3,ieee", help="the WY kernel's dot precisions to time")
    ap.add_argument("--wy-configs", default="16x4,16x8,32x4,32x8,64x4,64x8", help="the WY launches to time: BLOCKxWARPS")
    args = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    n = args.nodes
    specs = [StateSpec(0, "conv", (C, K - 1), "act"), StateSpec(0, "delta", (HV, DK, DV), "f32")]
    store = RecurrentStates(specs, slots=1, nodes=n + 1, act_dtype=torch.bfloat16, device=dev)
    gen = torch.Generator().manual_seed(1)
    store.committed[(0, "conv")].copy_(torch.randn(1, C, K - 1, generator=gen).to(torch.bfloat16))
    store.committed[(0, "delta")].copy_(torch.randn(1, HV, DK, DV, generator=gen) * 0.1)
    slots = torch.zeros(1, dtype=torch.long, device=dev)
    parents = parents_of(n).to(dev)
    rf = store.begin(slots, torch.zeros(1, dtype=torch.long, device=dev), parents)
    rf.paths()
    one = store.begin(slots, torch.zeros(1, dtype=torch.long, device=dev), torch.full((1, 1), -1, device=dev))
    x = (torch.randn(1, n, C, generator=gen)).to(torch.bfloat16).to(dev)
    w = (torch.randn(C, 1, K, generator=gen) * 0.3).to(torch.bfloat16).to(dev)
    bias = (torch.randn(C, generator=gen) * 0.1).to(torch.bfloat16).to(dev)
    qkv = torch.randn(1, n, C, generator=gen).to(torch.bfloat16).to(dev)
    bb = torch.randn(1, n, HV, generator=gen).to(torch.bfloat16).to(dev)
    aa = torch.randn(1, n, HV, generator=gen).to(torch.bfloat16).to(dev)
    a_log = torch.randn(HV, generator=gen).to(torch.bfloat16).to(dev)
    dt_bias = torch.randn(HV, generator=gen).to(torch.bfloat16).to(dev)
    depth = int(rf.paths()[1].max())
    rows, checks = {"shape": dict(Hk=HK, Hv=HV, Dk=DK, Dv=DV, conv_channels=C, K=K, nodes=n, max_depth=depth),
                    "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu (interpreter: checks only)"}, {}
    ring = store.scratch[(0, "conv")]
    y_walk = conv1d_tree(x, w, bias, rf, (0, "conv"), paths=False)
    ring_walk = ring.clone()
    ring.fill_(float("nan"))  # PATHS must write every node's window itself
    y_paths = conv1d_tree(x, w, bias, rf, (0, "conv"), paths=True)
    ring[:, n:] = ring_walk[:, n:]  # the ring's spare node
    checks["conv paths == walk"] = bool(torch.equal(y_walk, y_paths) and torch.equal(ring, ring_walk))
    rows["conv1d_us"] = {"walk": replay_us(lambda: conv1d_tree(x, w, bias, rf, (0, "conv"), paths=False)),
                         "paths": replay_us(lambda: conv1d_tree(x, w, bias, rf, (0, "conv"), paths=True)),
                         "decode (1 token)": replay_us(lambda: conv1d_tree(x[:, :1], w, bias, one, (0, "conv")))}
    for block_c in (256, 512, 1024) if dev == "cuda" else ():
        for warps in (4, 8):
            name = f"paths block_c={block_c} warps={warps}"
            y = conv1d_tree(x, w, bias, rf, (0, "conv"), paths=True, block_c=block_c, num_warps=warps)
            checks[f"conv {name} == walk"] = bool(torch.equal(y, y_walk))
            rows["conv1d_us"][name] = replay_us(lambda bc=block_c, nw=warps: conv1d_tree(
                x, w, bias, rf, (0, "conv"), paths=True, block_c=bc, num_warps=nw))
            print(f"conv {name}: {rows['conv1d_us'][name]} us", file=sys.stderr, flush=True)
    kw = dict(k_heads=HK, v_heads=HV, k_dim=DK, v_dim=DV)
    delta = {}
    for block_v in (32, 64):
        for warps in (2, 4):
            stored = gated_delta_rule_tree(qkv, bb, aa, a_log, dt_bias, rf, (0, "delta"), block_v=block_v,
                                           num_warps=warps, **kw)
            unstored = gated_delta_rule_tree(qkv, bb, aa, a_log, dt_bias, rf, (0, "delta"), block_v=block_v,
                                             num_warps=warps, store_states=False, **kw)
            # the outputs do not depend on writing the states (other configurations reduce in another order)
            checks[f"delta v{block_v} w{warps}: outputs equal without the state writes"] = bool(torch.equal(stored, unstored))
            for store_states in (True, False):
                delta[f"block_v={block_v} warps={warps} store={store_states}"] = replay_us(
                    lambda bv=block_v, nw=warps, st=store_states: gated_delta_rule_tree(
                        qkv, bb, aa, a_log, dt_bias, rf, (0, "delta"), block_v=bv, num_warps=nw, store_states=st, **kw))
            if dev != "cuda":
                break
        if dev != "cuda":
            break
    from specir.backends.triton.kernels.delta_factors import attach_delta_factors
    factors = attach_delta_factors(store, (0, "delta"))
    ref = gated_delta_rule_tree(qkv, bb, aa, a_log, dt_bias, rf, (0, "delta"), variant="paths", **kw).float()
    ref_states = store.scratch[(0, "delta")][0, :n].clone()
    wy = {}
    for precision in args.precisions.split(",") if dev == "cuda" else ("ieee",):
        for block_v, warps in (map(int, c.split("x")) for c in args.wy_configs.split(",")):
            name = f"block_v={block_v} warps={warps} {precision}"
            run = lambda bv=block_v, nw=warps, pr=precision: gated_delta_rule_tree(  # noqa: E731
                qkv, bb, aa, a_log, dt_bias, rf, (0, "delta"), variant="wy", block_v=bv, num_warps=nw,
                precision=pr, **kw)
            try:
                out = run().float()
            except Exception as exc:  # e.g. a configuration past the shared memory
                wy[name] = f"{type(exc).__name__}: {str(exc)[:120]}"
                continue
            scale = ref.pow(2).mean().sqrt()
            # bf16 outputs: an fp32 difference of rounding flips a rounding step (2^-8 relative)
            err = float(((out - ref).abs() / (ref.abs() + scale)).max())
            checks[f"wy {name}: outputs within one bf16 step of PATHS"] = err <= 2 ** -7
            rows.setdefault("wy_output_error", {})[name] = err
            nodes = torch.arange(n, device=dev)
            rebuilt = store.node_states((0, "delta"), torch.zeros(n, dtype=torch.long, device=dev), nodes)
            err = float(((rebuilt - ref_states).abs().max() / ref_states.abs().max()))
            checks[f"wy {name}: node states within 1e-4 of PATHS"] = err < 1e-4
            wy[name] = replay_us(run)
            print(f"wy {name}: {wy[name]} us", file=sys.stderr, flush=True)  # a killed run keeps what it timed
            if dev != "cuda":
                break
    node = torch.tensor([n - 1], device=dev)
    keep = store.committed[(0, "delta")].clone()
    wy["commit of one node (rebuilt from the factors)"] = replay_us(
        lambda: factors.commit(store, (0, "delta"), slots, node))
    store.committed[(0, "delta")].copy_(keep)
    rows["gated_delta_wy_us"] = wy
    delta["decode (1 token)"] = replay_us(lambda: gated_delta_rule_tree(qkv[:, :1], bb[:, :1], aa[:, :1], a_log, dt_bias,
                                                                       one, (0, "delta"), **kw))
    rows["gated_delta_us"], rows["checks"] = delta, checks
    text = json.dumps(rows, indent=1)
    if args.out:
        open(args.out, "w").write(text)
    print(text)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
