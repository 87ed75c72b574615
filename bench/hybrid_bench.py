"""GPU benchmark of a hybrid recurrent target at a production shape (one H200 call).

    python bench/hybrid_bench.py --out $OUT [--shape qwen3.5-9b|nemotron-h-8b] [--batch-sizes 1,8]
                                 [--budget-s 560] [--stages models,compile,roofline,bench] [--tiny]

Stages (each skipped when the remaining budget cannot fit it; OUT/hybrid_bench.json is rewritten
after each, so a stage that fails or runs out of time loses nothing before it):
  models    random-weight checkpoints made with transformers' own config classes on the device:
            the target at the chosen shape (SHAPES) and a Llama drafter of the 1B width at 3 layers
            with the target's vocabulary; both carry the zoo tokenizer (its 4096 ids; the other
            rows never occur in the prompts). Random weights: speeds are valid, acceptance is not
            (tau ~ 1); `projection` below shows speedups at a stated tau.
  compile   `specir init` (chain k = 4; tree: depth 8, top-k 6, budget 63: 64 nodes with the pending token) and
            `specir compile --target h200` of each, and tree-fr: the tree with draft-vocab{size=32768,order=frequency}
            (`--builds tree-fr` benches it), tree-bf: the tree with batch-fusion's defaults, and tree-2l:
            the tree with two-level-verify{kind=layers} (a mid level of the target's first half of
            layers, its own recurrent state); a variant is compiled only when --builds names it
  roofline  the AR forward (T = 1, plus argmax; the engine's executor, CUDA-graph replays) at each
            context against the roofline: weight bytes except the embedding, plus KV bytes at that
            context, plus recurrent state bytes (the committed state read and a node state
            written, per recurrent layer), over the measured copy bandwidth; then the verify-cost
            curve: one forward + argmax over a random tree of n nodes (n = 1 .. 128), relative to n = 1,
            and (`kernels`) the 1-node and the 64-node (else the largest) tree's forward per kernel family (torch.profiler,
            eager launches: where the tree's extra time goes)
  bench     (run before roofline) `specir bench BUILD --workload code-completion --batch-size B --check` for chain and
            tree: tokens/s, speedup over AR in the same run, tau, token forcing of every output (batch
            sizes outside --check-batch-sizes run without --check)
  projection  per build and batch: step cost = tau / tokens-per-s (from bench), and the speedup it
            would give at --tau-chain / --tau-tree (default: the trained small hybrid's taus with the
            shipped drafter on code-completion at these builds' shapes, 3.50 and 6.69,
            bench/results/acceptance-hybrid)
A short table is printed last. On one H200 the whole run may not fit one 600 s call: run
`--stages models,compile,roofline`, then `--stages bench,projection --builds chain` and
`--builds tree` (same --work, machine still warm: the checkpoints and builds are reused; use a
separate --out per call, the JSON is rewritten per call). --tiny: a tiny shape on this machine (a CPU smoke test under
TRITON_INTERPRET=1; tests/hybrid/test_hybrid_bench_smoke.py).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import _checkout  # noqa: F401  (a plain checkout runs too)

import torch  # noqa: E402
from timing import Clock  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO_TOKENIZER = os.path.join(ROOT, "specir", "zoo", "models", "code-target")
LAYERS_Q35 = ["linear_attention"] * 3 + ["full_attention"]
SHAPES = {
    # Qwen3.5-9B-like: 32 layers, 3 Gated DeltaNet : 1 gated attention
    "qwen3.5-9b": ("Qwen3_5TextConfig", dict(
        hidden_size=4096, intermediate_size=12288, num_hidden_layers=32, layer_types=LAYERS_Q35 * 8,
        num_attention_heads=16, num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
        linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
        vocab_size=248320, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25})),
    # Nemotron-H-8B-like: 52 blocks (24 Mamba2, 24 relu2 MLP, 4 attention)
    "nemotron-h-8b": ("NemotronHConfig", dict(
        hidden_size=4096, intermediate_size=21504, hybrid_override_pattern="M-M-M-M*-" * 4 + "M-M-M-M-M-M-M-M-",
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, mamba_num_heads=128, mamba_head_dim=64,
        ssm_state_size=128, n_groups=8, conv_kernel=4, chunk_size=128, vocab_size=131072)),
    "tiny": ("Qwen3_5TextConfig", dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=8, linear_conv_kernel_dim=4, vocab_size=4096,
        tie_word_embeddings=False)),
}
DRAFTER = dict(hidden_size=2048, num_hidden_layers=3, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
               intermediate_size=8192, tie_word_embeddings=True)
TINY_DRAFTER = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=1, head_dim=8,
                    intermediate_size=64, tie_word_embeddings=True)
# the tree: 64 nodes with its root (the pending token and a 63-token draft), one forward of 64 tokens
BUILDS = {"chain": ["--k", "4"], "tree": ["--draft", "tree", "--k", "8", "--topk", "6", "--budget", "63"]}
TINY_BUILDS = {"chain": ["--k", "2"], "tree": ["--draft", "tree", "--k", "2", "--topk", "2", "--budget", "3"]}
# builds compiled from another build's spec with passes added: tree-fr, the tree whose drafter proposes from the
# 32768 ids most frequent in the zoo's training documents (draft-vocab{order=frequency}; a head of 32768 of its
# 248320 rows). The drafter's real ids (the zoo tokenizer's 4096) are all kept, so its tau is the tree's here.
# tree-bf: the tree with batch-fusion's defaults (its packed verify; the shrink table drafts less as the batch grows)
VARIANTS = {"tree-fr": ("tree", "draft-vocab{size=32768,order=frequency}"), "tree-bf": ("tree", "batch-fusion"),
            "tree-2l": ("tree", "two-level-verify{kind=layers}")}
TINY_VARIANTS = {"tree-fr": ("tree", "draft-vocab{size=64,order=frequency}")}


class Report:
    def __init__(self, out: str, budget_s: float):
        self.out, self.start, self.budget = out, time.time(), budget_s
        self.data = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv[1:],
                     "stages": {}, "commands": []}
        os.makedirs(out, exist_ok=True)

    def left(self) -> float:
        return self.budget - (time.time() - self.start)

    def write(self) -> None:
        path = os.path.join(self.out, "hybrid_bench.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(path + ".tmp", path)

    def stage(self, name: str, fn, need_s: float) -> None:
        if self.left() < need_s:
            self.data["stages"][name] = {"skipped": f"{self.left():.0f} s left, needs ~{need_s:.0f} s"}
        else:
            t0 = time.time()
            try:
                self.data["stages"][name] = {"result": fn(), "seconds": round(time.time() - t0, 1)}
            except Exception as exc:  # a failed stage is reported, the next ones still run
                import traceback
                self.data["stages"][name] = {"error": f"{type(exc).__name__}: {exc}",
                                             "traceback": traceback.format_exc()[-3000:]}
        print(f"[{name}] {json.dumps(self.data['stages'][name], default=str)[:400]}", flush=True)
        self.write()

    def sh(self, cmd: list[str], log: str, timeout: float) -> tuple[int, str]:
        t0 = time.time()
        timeout = max(5.0, min(timeout, self.left() - 5))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                                  env=dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1"))
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            code, out, err = 124, "", f"timed out after {timeout:.0f} s"
        with open(os.path.join(self.out, log), "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{err}\n[exit {code} after {time.time() - t0:.1f} s]\n")
        self.data["commands"].append({"cmd": " ".join(cmd), "exit": code, "seconds": round(time.time() - t0, 1)})
        return code, out if code == 0 else out + err


def specir(*args) -> list[str]:
    return [sys.executable, "-m", "specir.cli.main", *map(str, args)]


# ---------------------------------------------------------------------- stages
def make_models(args, work: str) -> dict:
    """Random bf16 checkpoints (target at the shape, Llama drafter), made on the device."""
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig
    cls_name, fields = SHAPES[args.shape]
    common = dict(bos_token_id=None, eos_token_id=None, pad_token_id=0, max_position_embeddings=32768)
    target_cfg = getattr(transformers, cls_name)(**fields, **common)
    drafter_cfg = LlamaConfig(vocab_size=target_cfg.vocab_size, rope_parameters={"rope_type": "default",
                              "rope_theta": 500000.0}, **(TINY_DRAFTER if args.tiny else DRAFTER), **common)
    out = {}
    for role, cfg in (("target", target_cfg), ("drafter", drafter_cfg)):
        folder = os.path.join(work, role)
        if not os.path.exists(os.path.join(folder, "config.json")):
            torch.manual_seed(0 if role == "target" else 1)
            with torch.device(args.device):
                model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
            model.save_pretrained(folder)
            del model
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()  # the bench stage's processes need the whole card (an H100's 80 GB)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy2(os.path.join(ZOO_TOKENIZER, name), os.path.join(folder, name))
        with torch.device("meta"):
            params = sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters())
        out[role] = {"folder": folder, "model_type": cfg.model_type, "parameters": params}
    return out


def compile_builds(args, report: Report, work: str) -> dict:
    out = {}
    for name, flags in (TINY_BUILDS if args.tiny else BUILDS).items():
        spec, build = os.path.join(work, f"{name}.spec"), os.path.join(work, f"build-{name}")
        code, text = report.sh(specir("init", "--target-model", os.path.join(work, "target"),
                                      "--drafter", os.path.join(work, "drafter"), *flags), "compile.log", 120)
        if code != 0:
            raise RuntimeError(f"init {name}: {text[-1500:]}")
        with open(spec, "w") as f:
            f.write(text)
        code, text = report.sh(specir("compile", spec, "--target", "h200", "-o", build), "compile.log", 180)
        if code != 0:
            raise RuntimeError(f"compile {name}: {text[-1500:]}")
        out[name] = build
    for name, (base, passes) in (TINY_VARIANTS if args.tiny else VARIANTS).items():
        if name not in args.builds.split(","):  # a variant is compiled when benched
            continue
        build = os.path.join(work, f"build-{name}")
        code, text = report.sh(specir("compile", os.path.join(work, f"{base}.spec"), "-p", passes, "--target", "h200",
                                      "-o", build), "compile.log", 180)
        if code != 0:
            raise RuntimeError(f"compile {name}: {text[-1500:]}")
        out[name] = build
    return out


def _tree_mask(n: int, seed: int) -> torch.Tensor:
    """[n, n] ancestor mask of a random tree (node t's parent drawn from 0 .. t - 1)."""
    gen = torch.Generator().manual_seed(seed)
    parents = [-1] + [int(torch.randint(0, t, (1,), generator=gen)) for t in range(1, n)]
    mask = torch.eye(n, dtype=torch.bool)
    for t, p in enumerate(parents):
        while p >= 0:
            mask[t, p] = True
            p = parents[p]
    return mask


def _tree_forward(cm, cache, n: int, ctx: int, dev: str):
    """A forward of one request over a random tree of `n` nodes (a single token when n = 1) after
    `ctx` cached tokens (the forward keeps its inputs)."""
    from specir.step.forward_inputs import ForwardInputs
    inputs = ForwardInputs.allocate(1, n, dev, mask_width=n if n > 1 else None)
    inputs.lens.fill_(ctx)
    if n > 1:
        inputs.mask.copy_(_tree_mask(n, n)[None])
    return cm.forward(cache, inputs)


def roofline(args, build: str) -> dict:
    """AR forward vs roofline at each context, and the verify-cost curve (see the module docstring)."""
    from specir.backends.triton.compiled_model import CompiledModel
    from specir.backends.triton.kernels.argmax import argmax
    from specir.load import load_pipeline
    from specir.runtime.weights import load_weights
    dev, clock = args.device, Clock(args.device, args.reps)
    ms = clock.ms
    src = torch.empty(1 << (28 if dev.startswith("cuda") else 22), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy_ms = ms(lambda: dst.copy_(src))
    bandwidth = 2 * src.numel() / (copy_ms * 1e-3)
    del src, dst
    model = load_pipeline(os.path.join(build, "pipeline.spec")).model("target")
    sizes = args.tree_sizes
    cm = CompiledModel(model, load_weights(model, dev), dev, state_nodes=max(sizes) + 1)
    embed = next(op.attrs["weight"] for op in model.graph.ops if op.name == "embed")
    weight_bytes = cm.weights.nbytes(skip={embed})
    state_bytes = sum(int(torch.Size(s.shape).numel()) * (4 if s.dtype == "f32" else 2) for s in cm.program.states)
    rows = {"copy_GBps": round(bandwidth / 1e9, 1), "weight_GB": round(weight_bytes / 1e9, 3),
            "state_MB_per_request": round(state_bytes / 1e6, 4), "ar": [], "verify": []}
    for ctx in args.contexts:
        cache = cm.new_cache(1, ctx + max(sizes) + 8)
        kv_bytes = sum(2 * kvh * hd * ctx * 2 for kvh, hd in cm.program.layers.values())
        for n in sizes:
            forward = _tree_forward(cm, cache, n, ctx, dev)
            t = ms(clock.graph(lambda f=forward: argmax(f.run()[0])))
            if n == 1:
                floor = (weight_bytes + kv_bytes + 2 * state_bytes) / bandwidth * 1e3
                rows["ar"].append({"context": ctx, "ms": round(t, 4), "roofline_ms": round(floor, 4),
                                   "x_roofline": round(t / floor, 3), "kv_MB": round(kv_bytes / 1e6, 1)})
                base = t
            rows["verify"].append({"context": ctx, "nodes": n, "ms": round(t, 4), "x_ar": round(t / base, 3)})
            del forward
        del cache
    # after every timing (a profiler session can slow later launches): where the tree's extra time goes
    ctx, rows["kernels"] = args.contexts[0], {}
    cache = cm.new_cache(1, ctx + max(sizes) + 8)
    # the 64-node tree: verified with its pending token, 65 tokens (else 64, else the largest), or --kernels-at
    at = args.kernels_at or [1, next((m for m in (65, 64) if m in sizes), max(sizes))]
    for n in at:
        forward = _tree_forward(cm, cache, n, ctx, dev)
        rows["kernels"][str(n)] = _kernel_breakdown(lambda f=forward: argmax(f.run()[0]), dev)
        del forward
    del cache
    del cm
    if dev.startswith("cuda"):
        torch.cuda.empty_cache()  # the bench stage's processes get the memory back
    return rows


def _kernel_breakdown(run, dev: str, reps: int = 5, top: int = 12) -> dict:
    """GPU kernel milliseconds per forward of `run` (eager, torch.profiler), grouped by kernel family
    as bench/step_profile.py groups them; on a CPU, the profiled CPU ops instead."""
    from step_profile import kernel_groups
    from torch.profiler import ProfilerActivity, profile
    run()
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        for _ in range(reps):
            run()
        sync()
    if dev.startswith("cuda"):
        total_ms, groups = kernel_groups(prof, reps)  # summed over the reps; the groups are per forward
        gpu_ms = total_ms / reps
    else:
        events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
        groups = [{"name": e.key, "ms_per_step": e.self_cpu_time_total / 1e3 / reps, "launches_per_step": e.count / reps}
                  for e in sorted(events, key=lambda e: -e.self_cpu_time_total)]
        gpu_ms = sum(g["ms_per_step"] for g in groups)
    return {"kernel_ms_per_forward": round(gpu_ms, 4),
            "groups": [{"name": g["name"], "ms": round(g["ms_per_step"], 4), "launches": g["launches_per_step"]}
                       for g in groups[:top]]}


def bench(args, report: Report, builds: dict) -> dict:
    """`specir bench` of each build: batch sizes in --check-batch-sizes with --check (token forcing),
    the others without (a judge's copy of the target beside a batch-8 tree's state ring does not fit
    an 80 GB card); the rows of both runs, by batch size."""
    checked = [b for b in args.batch_sizes.split(",") if args.check and b in args.check_batch_sizes.split(",")]
    plain = [b for b in args.batch_sizes.split(",") if b not in checked]
    out = {}
    for name, build in builds.items():
        rows, errors = [], []
        for sizes, check in ((checked, True), (plain, False)):
            if not sizes:
                continue
            folder = os.path.join(args.out, f"bench-{name}" + ("" if check else "-unchecked"))
            cmd = specir("bench", build, "--workload", args.workload, "--batch-size", ",".join(sizes),
                         "--limit", args.limit, "--max-new-tokens", args.max_new_tokens, "--out", folder, "--json")
            code, text = report.sh(cmd + (["--check"] if check else []), "bench.log", args.bench_timeout)
            if code != 0:
                errors.append(text[-1500:])
                continue
            rows += [dict(r, checked=check) for r in json.loads(text.strip().splitlines()[-1])["rows"]]
        out[name] = sorted(rows, key=lambda r: r["batch_size"]) if rows else {"error": "\n".join(errors)}
        if rows and errors:
            report.data.setdefault("bench_errors", {})[name] = errors
    return out


def projection(args, rows: dict) -> list[dict]:
    """Per build and batch: steps/s = tok/s / tau, and the speedup over AR at an assumed tau."""
    assumed = {"chain": args.tau_chain, "tree": args.tau_tree, "tree-fr": args.tau_tree, "tree-bf": args.tau_tree}
    out = []
    for name, result in rows.items():
        for row in result if isinstance(result, list) else []:
            if not row.get("tau"):
                continue
            steps = row["tokens_per_s"] / row["tau"] / row["batch_size"]
            ar_step = row["ar_tokens_per_s"] / row["batch_size"]
            out.append({"build": name, "batch": row["batch_size"], "step_ms": round(1e3 / steps, 3),
                        "ar_step_ms": round(1e3 / ar_step, 3), "step_x_ar": round(ar_step / steps, 3),
                        "assumed_tau": assumed[name],
                        "projected_speedup": round(assumed[name] * steps / ar_step, 3)})
    return out


def table(data: dict) -> str:
    lines = []
    st = data["stages"]
    roof = st.get("roofline", {}).get("result")
    if roof:
        lines.append(f"copy {roof['copy_GBps']} GB/s, weights {roof['weight_GB']} GB, "
                     f"state {roof['state_MB_per_request']} MB/request")
        for r in roof["ar"]:
            lines.append(f"AR forward ctx {r['context']}: {r['ms']} ms = {r['x_roofline']}x roofline ({r['roofline_ms']} ms)")
        lines.append("verify cost (x AR): " + ", ".join(f"{r['nodes']}:{r['x_ar']}" for r in roof["verify"]
                                                        if r["context"] == roof["ar"][0]["context"]))
    for name, rows in (st.get("bench", {}).get("result") or {}).items():
        for r in rows if isinstance(rows, list) else []:
            lines.append(f"{name:5} b{r['batch_size']}: AR {r['ar_tokens_per_s']:.1f} tok/s, {r['tokens_per_s']:.1f} "
                         f"tok/s, speedup {r['speedup']:.2f}x, tau {r['tau']:.2f}, mismatches "
                         f"{r.get('mismatches') if r.get('checked', True) else 'not checked'}")
        if not isinstance(rows, list):
            lines.append(f"{name}: bench failed (see bench.log)")
    for p in st.get("projection", {}).get("result") or []:
        lines.append(f"{p['build']:5} b{p['batch']}: step {p['step_ms']} ms = {p['step_x_ar']}x AR step; at tau "
                     f"{p['assumed_tau']} (assumed) -> {p['projected_speedup']}x")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", default="qwen3.5-9b", choices=[s for s in SHAPES if s != "tiny"])
    ap.add_argument("--stages", default="models,compile,roofline,bench,projection")
    ap.add_argument("--builds", default="chain,tree", help="which builds the bench stage times")
    ap.add_argument("--kernels-at", default="", help="tree sizes whose forward the roofline stage breaks down by "
                    "kernel (default: 1 and the 65-, 64-token or largest tree)")
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--contexts", default="512,2048")
    ap.add_argument("--tree-sizes", default="1,2,4,8,16,32,64,65,128")
    ap.add_argument("--workload", default="code-completion")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-check", dest="check", action="store_false", help="skip token forcing in bench")
    ap.add_argument("--check-batch-sizes", default="1,4,8",
                    help="batch sizes benched with --check; the others are timed without token forcing")
    # the trained small hybrid's taus on code-completion with the shipped drafter, these builds' shapes
    # (chain-k4: bench/results/acceptance-hybrid-2026-12-06; tree-d8k6-b63: acceptance-hybrid-2026-12-06b)
    ap.add_argument("--tau-chain", type=float, default=3.50)
    ap.add_argument("--tau-tree", type=float, default=6.69)
    ap.add_argument("--budget-s", type=float, default=560)
    ap.add_argument("--bench-timeout", type=float, default=400, help="per `specir bench` call")
    ap.add_argument("--work", default="/tmp/hybrid-bench", help="checkpoints and builds")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny shape, CPU smoke test (TRITON_INTERPRET=1)")
    args = ap.parse_args(argv)
    if args.tiny:
        args.shape, args.contexts, args.tree_sizes, args.reps = "tiny", "8", "1,3", 1
        args.limit, args.max_new_tokens, args.batch_sizes = 1, 2, "1"
    args.contexts = [int(c) for c in args.contexts.split(",")]
    args.tree_sizes = [int(n) for n in args.tree_sizes.split(",")]
    args.kernels_at = [int(n) for n in args.kernels_at.split(",") if n]
    stages = set(args.stages.split(","))
    report = Report(args.out, args.budget_s)
    report.data.update(shape=args.shape, shape_fields=SHAPES[args.shape][1], device=args.device)
    if args.device.startswith("cuda") and torch.cuda.is_available():
        report.data["gpu"] = torch.cuda.get_device_name()
    work = os.path.join(args.work, args.shape)
    builds = {name: os.path.join(work, f"build-{name}")
              for name in [*(TINY_BUILDS if args.tiny else BUILDS), *(TINY_VARIANTS if args.tiny else VARIANTS)]}
    if "models" in stages:
        report.stage("models", lambda: make_models(args, work), 30)
    if "compile" in stages:
        report.stage("compile", lambda: compile_builds(args, report, work), 40)
    if "bench" in stages:  # before roofline: this process then holds no GPU memory the benches need
        chosen = {name: builds[name] for name in args.builds.split(",")}
        report.stage("bench", lambda: bench(args, report, chosen), 60)
    if "roofline" in stages:
        report.stage("roofline", lambda: roofline(args, builds["chain"]), 30)
    if "projection" in stages:
        report.stage("projection", lambda: projection(args, report.data["stages"].get("bench", {}).get("result") or {}), 0)
    text = table(report.data)
    with open(os.path.join(args.out, "hybrid_bench.md"), "w") as f:
        f.write(f"# hybrid bench {args.shape} ({report.data['date']})\n\n```\n{text}\n```\n")
    print(text)
    failed = [n for n, s in report.data["stages"].items() if "error" in s]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
