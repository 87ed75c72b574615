"""GPU benchmark of the Triton backend at the Llama-3.1-8B shape (one H200 call).

    python bench/gpu_bench.py --out DIR [--quick] [--random-8b] [--budget-s S]

Sections, each written to DIR/gpu_bench.json and DIR/gpu_bench.md as soon as it finishes (a
later section that fails or runs out of time loses nothing before it):
  env          date, command, GPU, versions
  copy         device-to-device copy bandwidth (read + write bytes / time)
  models       the weights: the shipped zoo pair embedded function-preservingly into the 8B
               target / 1B drafter shapes on the GPU (in memory, specir.zoo.inflate's
               construction), or with --random-8b (or when the zoo pair is missing) random
               weights of those shapes: speed numbers stay valid, acceptance does not. Two
               drafter shapes: 1B-16L (llama-3.2-1b: the 3 trained layers spread over 16, the
               13 others near-identity padding that still costs its bytes) and 1B-3L
               (llama-1b-width-3l: the 1B width at the trained depth, layers 1:1), so drafter
               cost is a variable of the report; both drafters propose the same tokens
  ar_step      AR decode step (captured step: forward, argmax, acceptance, commit) at each
               context against the roofline (weight bytes except the embedding + KV bytes, over
               the measured copy bandwidth); plain torch + cuBLAS + SDPA in a CUDA graph too
  breakdown    the AR forward's launches grouped by kind and shape, each group timed alone
               (its own CUDA graph): where the time goes, against each group's byte floor
  verify       verify-cost curve: target forward + argmax over a random tree of n nodes
               (n = 1, 2, 4, ..., 128) at each context, relative to n = 1
  packed_attn  one attention launch of a packed (batch-fusion) verify forward at the target's
               heads: 64 requests x 7 rows at the first context (a 512-row bucket, 64 pad rows),
               grouped by request (row_start: each request's KV read once) vs per row (once per
               row), against the byte floor of reading each request's KV once
  draft        draft-step cost: drafter forwards, whole chain / tree / AR steps (captured),
               chain and tree with each drafter shape (chain-3l, tree-3l: the 1B-3L drafter),
               and tree-3l-v (tree-3l with the README pipeline's draft-vocab{size=Sizes.draft_vocab}:
               the drafter's head narrowed to its first ids; the step's cost, not its acceptance)
  e2e          end to end at batch 1 per workload: AR, chain, tree and n-gram pipelines
               (chain and tree also with the 1B-3L drafter: chain-3l, tree-3l),
               tokens/s, tau, speedup over AR in the same engine; token forcing of every output
               against transformers on the same weights (mismatches must be 0)
  peers        transformers' generate and assisted generation on the same weights
Times: CUDA events around repeated replays of captured CUDA graphs (median of three batches).
A short table is printed last.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
import time
import traceback

import _checkout  # noqa: E402,F401  (a plain checkout runs too)

import torch  # noqa: E402
from timing import Clock  # noqa: E402

from specir.passes.fusion import LATE_DEFAULTS  # noqa: E402


@dataclasses.dataclass
class Sizes:
    target_shape: str = "llama-3.1-8b"
    drafter_shape: str = "llama-3.2-1b"
    drafter_3l_shape: str | None = "llama-1b-width-3l"   # second drafter shape (None: leave it out)
    contexts: tuple = (512, 2048)
    tree_sizes: tuple = (1, 2, 4, 8, 16, 32, 64, 128)
    reps: int = 30
    chain_k: int = 4
    tree: tuple = (6, 8, 64)        # depth, topk, budget (a 65-node verify)
    ngram_k: int = 4
    workloads: tuple = ("code-completion", "docstrings", "refactor", "prose")
    prompts_per_workload: int = 3
    max_new: int = 96
    peer_tokens: int = 32
    batch_sizes: tuple = (1,)       # e2e batch sizes (specir bench --batch-size covers 8, 32, 64)
    activations: str = "bf16"       # the pipelines' activation dtype (the smoke test runs f32: faster interpreter)
    device: str = "cuda"
    tiny: dict | None = None        # smoke test: explicit shapes instead of the named ones
    e2e_pipelines: tuple | None = None  # e2e: these pipelines only (None: all)
    passes: str = ""                # passes run on every pipeline before the backend policy (--passes)
    draft_vocab: int = 16384        # draft: tree-3l-v's draft-vocab size (the README GPU pipeline's)
    packed: tuple = (64, 7, 65)     # packed_attn: requests x packed rows per request x mask width (the tree's verify width)


QUICK = dict(tree_sizes=(1, 16, 64, 128), reps=20, prompts_per_workload=1, max_new=64, peer_tokens=16,
             workloads=("code-completion", "prose"))
# tiny shapes for the CPU smoke test of this script (tests/triton_backend/test_gpu_bench_smoke.py)
TINY_TARGET = dict(name="tiny-target", hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, intermediate_size=96, vocab_size=300,
                   tie_word_embeddings=False)
TINY_DRAFTER = dict(TINY_TARGET, name="tiny-drafter", tie_word_embeddings=True)
SMOKE = dict(contexts=(16,), tree_sizes=(1, 3), reps=1, chain_k=2, tree=(2, 2, 3), ngram_k=2, packed=(2, 5, 5),
             draft_vocab=128,
             workloads=("code-completion",), prompts_per_workload=1, max_new=2, peer_tokens=2,
             activations="f32", device="cpu",
             tiny={"target": TINY_TARGET, "drafter": TINY_DRAFTER,
                   "drafter_3l": dict(TINY_DRAFTER, name="tiny-drafter-3l")})
DRAFTER_LABEL = {"drafter": "1B-16L", "drafter_3l": "1B-3L"}
SECOND_DRAFTER = {"chain-3l": "chain", "tree-3l": "tree"}   # pipelines with the 1B-3L drafter
NARROWED = {"tree-3l-v": "tree-3l"}   # draft section only: the pipeline with draft-vocab{size=Sizes.draft_vocab}
WITH_3L = {*SECOND_DRAFTER, *NARROWED}   # the pipelines drafting with the 1B-3L drafter
ROPE_8B = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


# ---------------------------------------------------------------------- report
class Report:
    """Sections of results, rewritten to DIR after each one; errors are recorded, not raised."""

    def __init__(self, out: str, budget_s: float, argv, skip=()):
        self.out, self.start, self.budget, self.skip = out, time.time(), budget_s, set(skip)
        os.makedirs(out, exist_ok=True)
        self.data = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                     "command": " ".join(["python"] + list(argv)), "sections": {}, "errors": {},
                     "skipped": {}}

    def left(self) -> float:
        return self.budget - (time.time() - self.start)

    def run(self, name: str, fn, need_s: float = 0.0):
        if name in self.skip:
            self.data["skipped"][name] = "--skip"
            return None
        if self.left() < need_s:
            self.data["skipped"][name] = f"time budget: {self.left():.0f} s left, about {need_s:.0f} s needed"
            print(f"[{name}] skipped (time budget)", flush=True)
            self.write()
            return None
        t0 = time.time()
        print(f"[{name}] ...", flush=True)
        try:
            result = fn()
            self.data["sections"][name] = result
            print(f"[{name}] done in {time.time() - t0:.1f} s", flush=True)
            return result
        except Exception as exc:  # keep what earlier sections measured
            self.data["errors"][name] = f"{type(exc).__name__}: {exc}\n" + traceback.format_exc()[-3000:]
            print(f"[{name}] FAILED: {type(exc).__name__}: {exc}", flush=True)
            return None
        finally:
            self.data.setdefault("section_seconds", {})[name] = round(time.time() - t0, 1)
            self.write()

    def write(self):
        with open(os.path.join(self.out, "gpu_bench.json"), "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        with open(os.path.join(self.out, "gpu_bench.md"), "w") as f:
            f.write(markdown(self.data))


# ---------------------------------------------------------------------- models
def shape_dict(name_or_dict) -> dict:
    if isinstance(name_or_dict, dict):
        return dict(name_or_dict, rope_parameters=dict(ROPE_8B), max_position_embeddings=131072)
    from specir.zoo.shapes import get_shape
    s = get_shape(name_or_dict)
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name != "note"}


def hf_config(shape: dict, small_cfg=None) -> dict:
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
           "rms_norm_eps": float(getattr(small_cfg, "rms_norm_eps", 1e-5)), "attention_bias": False,
           "mlp_bias": False, "torch_dtype": "bfloat16"}
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings"):
        cfg[key] = shape[key]
    cfg["rope_parameters"] = dict(small_cfg.rope_parameters) if small_cfg is not None else dict(shape["rope_parameters"])
    if small_cfg is not None:
        cfg.update(bos_token_id=small_cfg.bos_token_id, eos_token_id=small_cfg.eos_token_id,
                   pad_token_id=small_cfg.pad_token_id)
    return cfg


def random_weights(shape: dict, device, seed: int) -> dict:
    """Random bf16 weights of a Llama shape, generated on the device (std 0.02, norms 1)."""
    g = torch.Generator(device=device).manual_seed(seed)
    H, I, V = shape["hidden_size"], shape["intermediate_size"], shape["vocab_size"]
    q, kv = shape["num_attention_heads"] * shape["head_dim"], shape["num_key_value_heads"] * shape["head_dim"]

    def mat(n, k):
        return (torch.randn(n, k, generator=g, device=device, dtype=torch.bfloat16) * 0.02)

    w = {"model.embed_tokens.weight": mat(V, H), "model.norm.weight": torch.ones(H, dtype=torch.bfloat16,
                                                                                  device=device)}
    for i in range(shape["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w.update({p + "self_attn.q_proj.weight": mat(q, H), p + "self_attn.k_proj.weight": mat(kv, H),
                  p + "self_attn.v_proj.weight": mat(kv, H), p + "self_attn.o_proj.weight": mat(H, q),
                  p + "mlp.gate_proj.weight": mat(I, H), p + "mlp.up_proj.weight": mat(I, H),
                  p + "mlp.down_proj.weight": mat(H, I),
                  p + "input_layernorm.weight": torch.ones(H, dtype=torch.bfloat16, device=device),
                  p + "post_attention_layernorm.weight": torch.ones(H, dtype=torch.bfloat16, device=device)})
    if not shape["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(V, H)
    return w


def inflate_in_memory(small_dir, shape_name, device, seed: int = 0):
    """(config dict, weights) of the zoo model `small_dir` embedded into `shape_name` (a zoo shape
    name or a Shape) on `device`: specir.zoo.inflate's shards, kept in memory (no files, no statistics)."""
    from specir.zoo.inflate import Embedder, check_compatible, inflated_shards
    from specir.zoo.shapes import get_shape
    from specir.zoo.small_model import load_small_model
    shape = get_shape(shape_name) if isinstance(shape_name, str) else shape_name
    cfg, small = load_small_model(small_dir)
    r = check_compatible(cfg, shape)
    dev = torch.device(device)
    small = {n: t.to(dev) for n, t in small.items()}
    E = Embedder(cfg.hidden_size, r, dev, seed)
    out = {}
    for tensors, _ in inflated_shards(cfg, small, shape, E):
        out.update({n: t.to(torch.bfloat16).contiguous() for n, t in tensors.items()})
    sd = {f.name: getattr(shape, f.name) for f in dataclasses.fields(shape) if f.name != "note"}
    return hf_config(sd, cfg), out


def ir_model(name: str, config: dict, weights: dict):
    """The IR model region of `config` over in-memory `weights` (the importer, fed tensor infos)."""
    from pathlib import Path

    from specir.importers.checkpoint import TensorInfo
    from specir.importers.llama import build_llama
    infos = {n: TensorInfo("bf16", tuple(t.shape), Path("<memory>")) for n, t in weights.items()}
    return build_llama(config, infos, name=name, source="<memory>")


def hf_model(config: dict, weights: dict):
    """transformers' LlamaForCausalLM sharing `weights`' storage (no copy)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(**{k: v for k, v in config.items() if k not in ("model_type", "architectures", "torch_dtype")})
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    state = dict(weights)
    if cfg.tie_word_embeddings:
        state["lm_head.weight"] = weights["model.embed_tokens.weight"]
    model.load_state_dict(state, assign=True, strict=False)
    if cfg.tie_word_embeddings:
        model.tie_weights()
    device = next(iter(weights.values())).device
    with torch.device(device):  # inv_freq in fp32, as from_pretrained leaves it
        model.model.rotary_emb = type(model.model.rotary_emb)(config=cfg)
    missing = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if missing:
        raise RuntimeError(f"transformers model has tensors without weights: {missing[:5]}")
    return model.eval()


def weight_bytes(weights: dict, skip=("model.embed_tokens.weight",)) -> int:
    return sum(t.numel() * t.element_size() for n, t in weights.items() if n not in skip)


def ancestor_mask(parents: list[int], size: int) -> torch.Tensor:
    """[size, size] bool: row t is True at t and at every ancestor of t."""
    mask = torch.eye(size, dtype=torch.bool)
    for t, p in enumerate(parents):
        while p >= 0:
            mask[t, p] = True
            p = parents[p]
    return mask


# ---------------------------------------------------------------------- pipelines
def pipelines(target, drafter, z: Sizes) -> dict:
    """AR, chain, tree (tree-verify pass) and n-gram pipelines over the two model regions, with the
    backend policy the Triton lowering writes into a build (as `specir compile` does)."""
    from specir.ir.nodes import Attrs, Op, Pipeline, Step
    from specir.ir.types import ACCEPTED, CONTEXT, TOKENS, logits
    from specir.pass_infra import PassManager, build_passes
    from specir.runtime.baseline import ar_pipeline

    def make(name, draft, models):
        ops = ([draft] if draft else []) + [
            Op("verify.chain", ("@target", "%ctx") + (("%draft",) if draft else ()), result="%logits", type=logits()),
            Op("accept.greedy", (("%draft",) if draft else ()) + ("%logits",), result="%accepted", type=ACCEPTED),
            Op("commit", ("%ctx", "%accepted"))]
        return Pipeline(name, models=models, step=Step((("%ctx", CONTEXT),), tuple(ops)))

    chain = make("chain", Op("draft.chain", ("@drafter", "%ctx"), Attrs({"k": z.chain_k}), "%draft", TOKENS),
                 (target, drafter))
    depth, topk, budget = z.tree
    tree = PassManager(build_passes(f"tree-verify{{depth={depth},topk={topk},budget={budget}}}")).run(chain)
    ngram = make("ngram", Op("draft.ngram", ("%ctx",), Attrs({"k": z.ngram_k}), "%draft", TOKENS), (target,))
    from specir.backends.triton.lowering import with_backend_policy
    # the backend policy `specir compile --target h200` writes (gemm routing, fusions): the same engines
    out = {"ar": ar_pipeline(chain, stock=False), "chain": chain, "tree": tree, "ngram": ngram}
    if z.passes:   # e.g. fusion{attention_prefetch=true}: the A/B of a policy
        out = {name: PassManager(build_passes(z.passes)).run(p) for name, p in out.items()}
    return {name: with_backend_policy(p) for name, p in out.items()}


def narrowed_draft_vocab(pipeline, weights: dict, size: int):
    """`pipeline` after draft-vocab{size} (order=id: no tokenizer or corpus needed; the step's bytes are the same as
    with order=frequency) and the weights with each narrowed head (a `rows_of` weight: its tensor's first rows) added."""
    from specir.backends.triton.lowering import with_backend_policy
    from specir.pass_infra import PassManager, build_passes
    out = with_backend_policy(PassManager(build_passes(f"draft-vocab{{size={size}}}")).run(pipeline))
    weights = {role: dict(w) for role, w in weights.items()}
    for model in out.models:
        for w in model.weights:
            if "rows_of" in w.attrs:
                weights[model.name][w.name] = weights[model.name][str(w.attrs["rows_of"])][: w.type.shape[0]].clone()
    return out, weights


# the AR step's A/B: the fusions that were opt-in until session 25 (passes/fusion.py) turned off
UNFUSED = "fusion{" + ",".join(f"{f}=false" for f in LATE_DEFAULTS) + ",models=target}"


# ---------------------------------------------------------------------- torch reference step
class TorchDecode:
    """Plain torch decode step (cuBLAS GEMVs on fused QKV / gate-up weights, SDPA over the cache,
    torch rope and RMSNorm), one token at a fixed context: the reference point for the AR step."""

    def __init__(self, weights: dict, shape: dict, context: int, device):
        from specir.rope import rope_frequencies
        self.s, self.ctx, self.dev = shape, context, device
        L, H, KH, D = shape["num_hidden_layers"], shape["num_attention_heads"], shape["num_key_value_heads"], \
            shape["head_dim"]
        self.L, self.H, self.KH, self.D = L, H, KH, D
        self.eps = 1e-5
        w = weights
        self.embed = w["model.embed_tokens.weight"]
        self.lm = w.get("lm_head.weight", self.embed)
        self.norm = w["model.norm.weight"]
        self.layers = []
        for i in range(L):
            p = f"model.layers.{i}."
            self.layers.append(dict(
                qkv=torch.cat([w[p + f"self_attn.{n}_proj.weight"] for n in "qkv"]),
                o=w[p + "self_attn.o_proj.weight"],
                gu=torch.cat([w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]]),
                down=w[p + "mlp.down_proj.weight"],
                n1=w[p + "input_layernorm.weight"], n2=w[p + "post_attention_layernorm.weight"]))
        self.k = [torch.zeros(1, KH, context + 1, D, dtype=torch.bfloat16, device=device) for _ in range(L)]
        self.v = [torch.zeros_like(t) for t in self.k]
        rope = {"type": shape["rope_parameters"].get("rope_type", "default"),
                "theta": shape["rope_parameters"]["rope_theta"],
                **{k: v for k, v in shape["rope_parameters"].items() if k not in ("rope_type", "rope_theta")}}
        inv, _ = rope_frequencies(rope, D)
        ang = context * inv.float()
        emb = torch.cat([ang, ang])
        self.cos, self.sin = emb.cos().to(device, torch.bfloat16), emb.sin().to(device, torch.bfloat16)
        self.token = torch.zeros(1, dtype=torch.long, device=device)

    def _rms(self, x, w):
        h = x.float()
        return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def _rope(self, x):
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * self.cos + rot * self.sin

    def step(self):
        F = torch.nn.functional
        H, KH, D, c = self.H, self.KH, self.D, self.ctx
        h = self.embed[self.token]                                 # [1, hidden]
        for i, lw in enumerate(self.layers):
            qkv = F.linear(self._rms(h, lw["n1"]), lw["qkv"])
            q, k, v = qkv.split([H * D, KH * D, KH * D], -1)
            q = self._rope(q.view(1, H, 1, D))
            self.k[i][:, :, c] = self._rope(k.view(1, KH, D))
            self.v[i][:, :, c] = v.view(1, KH, D)
            a = F.scaled_dot_product_attention(q, self.k[i], self.v[i], enable_gqa=True)
            h = h + F.linear(a.reshape(1, H * D), lw["o"])
            gu = F.linear(self._rms(h, lw["n2"]), lw["gu"])
            g, u = gu.chunk(2, -1)
            h = h + F.linear(F.silu(g) * u, lw["down"])
        self.token.copy_(F.linear(self._rms(h, self.norm), self.lm).argmax(-1))


# ---------------------------------------------------------------------- the bench
class Bench:
    def __init__(self, z: Sizes, args, report: Report, clock: Clock):
        self.z, self.args, self.report, self.clock = z, args, report, clock
        self.device = z.device
        self.state = {}

    # ------------------------------------------------------------- sections
    def env(self):
        import triton
        info = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
                "device": self.device, "interpreter": os.environ.get("TRITON_INTERPRET", "0")}
        try:
            import transformers
            info["transformers"] = transformers.__version__
        except ImportError:
            pass
        if self.device.startswith("cuda"):
            p = torch.cuda.get_device_properties(0)
            info.update(gpu=torch.cuda.get_device_name(0), sm_count=p.multi_processor_count,
                        memory_gb=round(p.total_memory / 2 ** 30, 1))
        else:
            info["gpu"] = "none (CPU smoke run)"
        return info

    def copy(self):
        n = (1 << 30) if self.device.startswith("cuda") else (1 << 20)
        src = torch.empty(n, dtype=torch.uint8, device=self.device)
        dst = torch.empty_like(src)
        ms = self.clock.ms(lambda: dst.copy_(src), reps=20)
        bw = 2 * n / (ms * 1e-3)
        self.state["copy_bw"] = bw
        del src, dst
        return {"bytes": n, "ms": ms, "copy_bandwidth_TBps": bw / 1e12}

    def models(self):
        z, dev = self.z, self.device
        note, small = "", None
        if z.tiny:
            source = "random (tiny smoke shapes)"
            shapes = {k: shape_dict(v) for k, v in z.tiny.items()}
        else:
            shapes = {"target": shape_dict(z.target_shape), "drafter": shape_dict(z.drafter_shape)}
            if z.drafter_3l_shape:
                shapes["drafter_3l"] = shape_dict(z.drafter_3l_shape)
            source = "random"
            if not self.args.random_8b:
                try:
                    from specir.zoo.paths import zoo_model_dir
                    small = {"target": zoo_model_dir("code-target"), "drafter": zoo_model_dir("code-drafter")}
                    source = "zoo-inflated"
                except Exception as exc:
                    note = f"zoo pair unavailable ({exc}); random weights instead"
        roles = [r for r in ("target", "drafter", "drafter_3l") if r in shapes]
        shape_names = {"target": z.target_shape, "drafter": z.drafter_shape, "drafter_3l": z.drafter_3l_shape}
        seeds = {"target": 1, "drafter": 2, "drafter_3l": 3}  # random weights
        zoo_seed = 0  # `specir zoo inflate`'s default: the same embedding, so the same weights as the CLI's build
        t0 = time.time()
        configs, weights = {}, {}
        if small:
            try:
                for role in roles:
                    src = small["target" if role == "target" else "drafter"]
                    configs[role], weights[role] = inflate_in_memory(src, shape_names[role], dev, seed=zoo_seed)
            except Exception as exc:  # speed numbers still come out of random weights
                note = f"in-memory inflation failed ({type(exc).__name__}: {exc}); random weights instead"
                source, small, configs, weights = "random", None, {}, {}
                if dev.startswith("cuda"):
                    torch.cuda.empty_cache()
        if not small:
            for role in roles:
                configs[role] = hf_config(shapes[role])
                weights[role] = random_weights(shapes[role], dev, seed=seeds[role])
        build_s = time.time() - t0
        if source == "random":
            note = (note + "; " if note else "") + ("random weights: speed numbers are valid, acceptance (tau, "
                                                    "speedup) is not that of a trained pair")
        # both drafters are the region "@drafter" of their pipelines
        ir = {role: ir_model("drafter" if role.startswith("drafter") else role, configs[role], weights[role])
              for role in roles}
        if z.activations != "bf16":
            ir = {role: dataclasses.replace(m, attrs=m.attrs.set(dtype=z.activations)) for role, m in ir.items()}
        t0 = time.time()
        from specir.backends.triton.step_backend import TritonStepBackend
        backend = TritonStepBackend(dev)  # one backend: every engine below shares its executors (device weights)
        compiled = {role: backend.compiled(ir[role], lambda role=role: weights[role]) for role in roles}
        self.state["backend"] = backend
        self.state.update(configs=configs, weights=weights, ir=ir, compiled=compiled, source=source,
                          shapes={r: dict(configs[r], rope_parameters=configs[r]["rope_parameters"]) for r in configs})
        return {"source": source, "note": note, "build_s": round(build_s, 1), "compile_s": round(time.time() - t0, 1),
                "target": {k: configs["target"][k] for k in ("hidden_size", "num_hidden_layers", "vocab_size")},
                "drafter": {k: configs["drafter"][k] for k in ("hidden_size", "num_hidden_layers", "vocab_size")},
                "drafter_3l": ({k: configs["drafter_3l"][k] for k in ("hidden_size", "num_hidden_layers", "vocab_size")}
                               if "drafter_3l" in configs else None),
                "target_weight_GB_no_embedding": weight_bytes(weights["target"]) / 1e9,
                "drafter_weight_GB_no_embedding": weight_bytes(weights["drafter"]) / 1e9,
                "drafter_3l_weight_GB_no_embedding": (weight_bytes(weights["drafter_3l"]) / 1e9
                                                      if "drafter_3l" in weights else None)}

    def _engines(self):
        """The StepEngines of every pipeline (the same class `specir bench` builds), on one backend."""
        if "engines" not in self.state:
            from specir.step.engine import StepEngine
            ir, backend, w = self.state["ir"], self.state["backend"], self.state["weights"]
            pipes = pipelines(ir["target"], ir["drafter"], self.z)
            weights = {"target": w["target"], "drafter": w["drafter"]}
            engines = {name: StepEngine(p, backend, weights=weights) for name, p in pipes.items()}
            if "drafter_3l" in ir:
                pipes_3l = pipelines(ir["target"], ir["drafter_3l"], self.z)
                weights_3l = {"target": w["target"], "drafter": w["drafter_3l"]}
                for name, base in SECOND_DRAFTER.items():
                    pipes[name] = pipes_3l[base]
                    engines[name] = StepEngine(pipes_3l[base], backend, weights=weights_3l)
                for name, base in NARROWED.items():
                    pipes[name], narrowed = narrowed_draft_vocab(pipes[base], weights_3l, self.z.draft_vocab)
                    engines[name] = StepEngine(pipes[name], backend, weights=narrowed)
            self.state["pipelines"] = pipes
            self.state["engines"] = engines
        return self.state["engines"]

    def _kv_bytes(self, ctx: int, role="target") -> int:
        c = self.state["configs"][role]
        return 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * c["head_dim"] * ctx * 2

    def _roofline_ms(self, ctx: int, role="target") -> float:
        return (weight_bytes(self.state["weights"][role]) + self._kv_bytes(ctx, role)) / self.state["copy_bw"] * 1e3

    def _step_session(self, name: str, ctx: int):
        """The step of pipeline `name` at batch 1 with its state frozen at context `ctx` (active = 0:
        every step recomputes the same work, nothing is committed), warmed and captured. Returns
        (session, step): `step()` runs one step (the captured graph's replay on a GPU)."""
        engine = self._engines()[name]
        sess = engine.session(1, max(self.z.contexts) + 2 * 160 + 64, False)
        ctx_ = sess.ctx
        sess.reset()
        for state in ctx_.models.values():
            state.lens.fill_(ctx if state.role == "verify" else ctx - 1)
            if state.role == "draft":
                state.feed.fill_(1)
                state.n_feed.fill_(1)
        ctx_.pending.fill_(1)

        def step():
            engine.program.run(ctx_, sess)
        for _ in range(3):  # eager (compiles), capture, replay
            step()
        return sess, step

    def _forward(self, sess, model: str, role: str, key):
        return sess.ctx.state(model, role).forwards[key][1]

    def _unfused_ar(self) -> None:
        """The AR engine with the fusions that were opt-in until session 25 turned off (UNFUSED: the
        swiglu, norm and rope + KV-write folds and the launch overlap), as engine "ar-unfused" on the
        same backend and weights: the A/B of the defaults."""
        engines = self._engines()
        if "ar-unfused" not in engines:
            from specir.pass_infra import PassManager, build_passes
            from specir.step.engine import StepEngine
            plain = PassManager(build_passes(UNFUSED)).run(self.state["pipelines"]["ar"])
            engines["ar-unfused"] = StepEngine(plain, self.state["backend"], weights={"target": self.state["weights"]["target"]})

    def ar_step(self):
        rows = []
        self._unfused_ar()
        for ctx in self.z.contexts:
            _, step = self._step_session("ar", ctx)
            ms = self.clock.ms(step)
            roof = self._roofline_ms(ctx)
            _, plain = self._step_session("ar-unfused", ctx)
            plain_ms = self.clock.ms(plain)
            rows.append({"context": ctx, "triton_step_ms": ms, "roofline_ms": roof, "x_roofline": ms / roof,
                         "unfused_step_ms": plain_ms, "unfused_x_roofline": plain_ms / roof})
        self.state["ar_ms"] = {r["context"]: r["triton_step_ms"] for r in rows}
        torch_rows = []
        for ctx in self.z.contexts[:1]:
            try:
                ref = TorchDecode(self.state["weights"]["target"], self.state["configs"]["target"], ctx, self.device)
                replay = self.clock.graph(ref.step)
                ms = self.clock.ms(replay)
                torch_rows.append({"context": ctx, "torch_cublas_graph_ms": ms,
                                   "x_roofline": ms / self._roofline_ms(ctx)})
                del ref, replay
            except Exception as exc:  # the reference point is optional; keep the Triton rows
                torch_rows.append({"context": ctx, "error": f"{type(exc).__name__}: {exc}"})
        return {"triton": rows, "torch": torch_rows, "target_x_roofline": 1.10}

    def _launch_groups(self, fwd, role: str, ctx: int) -> tuple[list[dict], float]:
        """The forward `fwd`'s launches grouped by kind and shape (a linear by its weight's shape and prologue), each
        group timed alone (its own CUDA graph), against its byte floor: the weights in their format, the attention's
        K/V of `role`'s shape at `ctx`. Returns (rows, the groups' summed ms)."""
        program, w = fwd.model.program, fwd.model.weights
        c = self.state["configs"][role]
        groups: dict[str, list] = {}
        nbytes: dict[str, int] = {}
        for i, (launch, call) in enumerate(zip(program.launches, fwd.calls)):
            if launch.kind in ("linear", "packed_linear"):
                weight = w.linear[i][0] if launch.kind == "linear" else w.packed[i][0]
                key = f"{launch.kind} {weight.shape[0]}x{weight.shape[1]}"
                if launch.attrs.get("prologue"):  # swiglu_linear, norm_linear: the swiglu or norm runs inside
                    key += f" + {launch.attrs['prologue']} prologue"
                b = weight.numel() * weight.element_size() if launch.kind == "linear" else weight.nbytes()
            elif launch.kind == "attention":
                key = "attention"
                b = 2 * c["num_key_value_heads"] * c["head_dim"] * ctx * 2
            else:
                key, b = launch.kind, 0
            groups.setdefault(key, []).append(call)
            nbytes[key] = nbytes.get(key, 0) + b
        bw = self.state["copy_bw"]
        rows = []
        total_alone = 0.0
        for key, calls in groups.items():
            replay = self.clock.graph(lambda calls=calls: [c() for c in calls])
            ms = self.clock.ms(replay)
            total_alone += ms
            floor = nbytes[key] / bw * 1e3
            rows.append({"group": key, "launches": len(calls), "ms": ms, "byte_floor_ms": floor,
                         "share_of_copy_bw": floor / ms if ms else 0.0})
            del replay
        rows.sort(key=lambda r: -r["ms"])
        return rows, total_alone

    def breakdown(self):
        """Launch groups of the AR forward (T = 1), each timed alone; plus the step's tail."""
        ctx = self.z.contexts[0]
        sess, step = self._step_session("ar", ctx)
        fwd = self._forward(sess, "target", "verify", ("verify", 1, False))
        program = fwd.model.program
        rows, total_alone = self._launch_groups(fwd, "target", ctx)
        fwd_ms = self.clock.ms(self.clock.graph(fwd.run))
        step_ms = self.clock.ms(step)
        return {"context": ctx, "groups": rows, "sum_of_groups_alone_ms": total_alone, "forward_ms": fwd_ms,
                "step_ms": step_ms, "step_minus_forward_ms": step_ms - fwd_ms,
                "roofline_ms": self._roofline_ms(ctx),
                "launches_per_forward": len(program.launches)}

    def verify(self):
        from specir.backends.triton.forward import ForwardInputs
        from specir.backends.triton.kernels.argmax import argmax
        compiled = self.state["compiled"]["target"]
        sess, _ = self._step_session("ar", self.z.contexts[0])
        cache = sess.ctx.state("target", "verify").cache
        gen = torch.Generator().manual_seed(0)
        rows = []
        for ctx in self.z.contexts:
            base = None
            for n in self.z.tree_sizes:
                parents = [-1] + [int(torch.randint(0, t, (1,), generator=gen)) for t in range(1, n)]
                depth = [0] * n
                for t in range(1, n):
                    depth[t] = depth[parents[t]] + 1
                inputs = ForwardInputs.allocate(1, n, self.device, mask_width=n)
                inputs.mask.copy_(ancestor_mask(parents, n)[None])
                inputs.pos.copy_(torch.tensor(depth)[None] + ctx)
                inputs.lens.fill_(ctx)
                fwd = compiled.forward(cache, inputs)
                out = torch.zeros(1, n, dtype=torch.long, device=self.device)
                replay = self.clock.graph(lambda: argmax(fwd.run(), out=out))
                ms = self.clock.ms(replay)
                base = base or ms
                linear = sorted({"cuBLAS" if c["kernel"] == "cublas.linear" else "Triton"
                                 for c in fwd.configs if "m" in c and c["kernel"] != "linear.linear_bf12"})
                rows.append({"context": ctx, "nodes": n, "ms": ms, "x_one_node": ms / base,
                             "x_ar_step": ms / self.state.get("ar_ms", {}).get(ctx, ms), "linear": "+".join(linear)})
                del replay, fwd, inputs
        return {"rows": rows, "target_64_x_ar_step": 1.25}

    def packed_attn(self):
        """The attention kernel alone over a packed verify forward's rows (one layer): R requests of
        n rows each (nodes 0..n-1 of a chain at the first context) under a mask U wide (the verify
        width of the draft the budget cut: the runtime sizes the grouped launch by U, as here),
        padded to ragged.capacity(R * n) rows, grouped (row_start) and per row; floor: each request's
        KV read once."""
        from specir.backends.triton.kernels.attention import attention, attention_config
        from specir.step import ragged
        c = self.state["configs"]["target"]
        H, KH, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        (R, n, U), ctx, dev = self.z.packed, self.z.contexts[0], self.device
        T = R * n
        P = ragged.capacity(T)
        dtype = torch.bfloat16 if self.z.activations == "bf16" else torch.float32
        max_seq = ctx + U
        gen = torch.Generator().manual_seed(0)
        q = torch.randn(P, 1, H, D, generator=gen).to(dtype).to(dev)
        k_cache = torch.randn(R, KH, max_seq, D, generator=gen).to(dtype).to(dev)
        v_cache = torch.randn(R, KH, max_seq, D, generator=gen).to(dtype).to(dev)
        request = torch.arange(T) // n
        node = torch.arange(T) % n
        request, node = torch.cat([request, request[:1].expand(P - T)]), torch.cat([node, node[:1].expand(P - T)])
        lens = torch.full((P,), ctx, dtype=torch.int32, device=dev)
        slots, offsets = request.to(torch.int32).to(dev), node.to(torch.int32).to(dev)
        mask = (torch.arange(U)[None, :] <= node[:, None])[:, None].to(dev)   # a chain: nodes 0..node
        row_start = (torch.arange(R + 1) * n).to(torch.int32).to(dev)
        configs = {"grouped": attention_config(R, U, H, KH, D, max_seq, dev, grouped=True),
                   "per_row": attention_config(P, 1, H, KH, D, max_seq, dev)}
        splits = max(cfg["num_splits"] for cfg in configs.values())
        workspace = torch.empty(P * H * splits * (D + 1), dtype=torch.float32, device=dev)
        out = torch.empty_like(q)
        args = (q, k_cache, v_cache, lens, mask)
        kw = dict(out=out, workspace=workspace, slots=slots, offsets=offsets)
        calls = {"grouped": lambda: attention(*args, row_start=row_start, **kw),
                 "per_row": lambda: attention(*args, **kw)}
        ms = {name: self.clock.ms(self.clock.graph(call)) for name, call in calls.items()}
        floor = R * 2 * KH * (ctx + n) * D * q.element_size() / self.state["copy_bw"] * 1e3
        return {"requests": R, "rows_per_request": n, "mask_width": U, "bucket": P, "context": ctx, "heads": H, "kv_heads": KH,
                "head_dim": D, "grouped_ms": ms["grouped"], "per_row_ms": ms["per_row"], "kv_once_floor_ms": floor,
                "configs": {name: {k: cfg[k] for k in ("grid", "block_m", "num_splits", "num_warps")}
                            for name, cfg in configs.items()}}

    def draft(self):
        ctx = self.z.contexts[0]
        rows = {}
        names = ["ar", "chain", "tree"] + [n for n in (*SECOND_DRAFTER, *NARROWED) if n in self._engines()]
        for name in names:
            if name in WITH_3L and self.report.left() < 15:
                rows[name] = {"skipped": "time budget"}
                continue
            sess, step = self._step_session(name, ctx)
            target = sess.ctx.state("target", "verify")
            key = next(k for k in target.forwards if k[0] == "verify")
            rows[name] = {"step_ms": self.clock.ms(step), "verify_nodes": key[1],
                          "drafter": None if name == "ar" else
                          DRAFTER_LABEL["drafter_3l" if name in WITH_3L else "drafter"],
                          "verify_forward_ms": self.clock.ms(self.clock.graph(target.forwards[key][1].run))}
            drafter = sess.ctx.models.get(("drafter", "draft"))
            for label, kind in (("drafter_one_token_ms", "draft"), ("drafter_catch_up_ms", "catch-up"),
                                ("drafter_level_ms", "tree-level")):
                keys = [k for k in (drafter.forwards if drafter else {}) if k[0] == kind]
                if keys:
                    rows[name][label] = self.clock.ms(self.clock.graph(drafter.forwards[keys[0]][1].run))
                    if kind == "tree-level" and name in ("tree-3l", *NARROWED):  # where a level's time goes
                        rows[name]["level_groups"] = self._launch_groups(drafter.forwards[keys[0]][1], "drafter_3l",
                                                                         ctx)[0]
            rows[name]["draft_and_accept_ms"] = rows[name]["step_ms"] - rows[name]["verify_forward_ms"]
        rows["drafter_roofline_ms"] = self._roofline_ms(ctx, "drafter")
        if "drafter_3l" in self.state["configs"]:
            rows["drafter_3l_roofline_ms"] = self._roofline_ms(ctx, "drafter_3l")
        return {"context": ctx, "steps": rows,
                "drafters": {name: DRAFTER_LABEL[role] for name, role in
                             (("chain", "drafter"), ("tree", "drafter"), ("chain-3l", "drafter_3l"),
                              ("tree-3l", "drafter_3l")) if name in rows}}

    def _prompts(self):
        from specir.runtime.prompts import to_ids
        from specir.zoo import workloads
        vocab = self.state["configs"]["target"]["vocab_size"]
        out = {}
        for name in self.z.workloads:
            rows = workloads.load(name)[: self.z.prompts_per_workload]
            if self.z.tiny:
                out[name] = [[(7 * i + 3 * j) % vocab for j in range(3)] for i in range(len(rows))]
                continue
            from specir.zoo.paths import zoo_model_dir
            out[name] = to_ids(rows, str(zoo_model_dir("code-target")), vocab)
        return out

    def _reference(self):
        if "reference" not in self.state:
            f32 = self.z.activations == "f32"
            self.state["hf"] = {role: hf_model(self.state["configs"][role],
                                               {n: t.float() if f32 else t for n, t in self.state["weights"][role].items()})
                                for role in ("target", "drafter")}
            model = self.state["hf"]["target"]
            dtype = self.z.activations

            class HFReference:
                dtype_name, kind = dtype, "transformers"

                @torch.no_grad()
                def logits(self, ids):
                    return model(torch.tensor([ids], device=model.device)).logits[0].float()

            self.state["reference"] = HFReference()
        return self.state["reference"]

    def e2e(self):
        """specir.runtime.bench.bench (what `specir bench` runs) per pipeline against AR, every timed
        output token-forced against transformers on the same weights."""
        from specir.runtime.bench import bench
        engines = self._engines()
        reference = self._reference()
        prompts = self._prompts()
        rows = []
        names = ["chain", "tree", "ngram"] + [n for n in SECOND_DRAFTER if n in engines]
        for name in [n for n in names if self.z.e2e_pipelines is None or n in self.z.e2e_pipelines]:
            if self.report.left() < 20:
                rows.append({"pipeline": name, "skipped": "time budget"})
                continue
            for r in bench(engines[name], engines["ar"], prompts, list(self.z.batch_sizes), self.z.max_new,
                           reference=reference):
                rows.append({**r.as_dict(), "pipeline": name,
                             "drafter": (DRAFTER_LABEL["drafter_3l"] if name in SECOND_DRAFTER else
                                         DRAFTER_LABEL["drafter"] if name in ("chain", "tree") else None)})
        return {"max_new_tokens": self.z.max_new, "rows": rows, "drafters": DRAFTER_LABEL,
                "timing": "specir.runtime.bench: decoding (prefill excluded), warm engines, same weights",
                "all_lossless": all(r.get("mismatches", 0) == 0 for r in rows)}

    def _hf_generate(self, model, ids, kw, extra, outputs, label):
        with torch.no_grad():
            model.generate(ids, **dict(kw, max_new_tokens=2, min_new_tokens=2), **extra)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model.generate(ids, **kw, **extra)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        made = out.shape[1] - ids.shape[1]
        outputs[label] = out[0, ids.shape[1]:].tolist()
        return {"tokens": made, "ms_per_token": dt * 1e3 / max(made, 1), "tokens_per_s": made / dt}

    def peers(self):
        self._reference()
        hf = self.state["hf"]
        prompts = self._prompts()
        p = next(iter(prompts.values()))[0]
        n = self.z.peer_tokens
        ids = torch.tensor([p], device=self.device)
        rows = {}
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
        outputs = {}
        for label, extra in (("generate", {}), ("assisted", {"assistant_model": hf["drafter"]})):
            try:
                rows[label] = self._hf_generate(hf["target"], ids, kw, extra, outputs, label)
            except Exception as exc:  # one peer failing keeps the other
                rows[label] = {"error": f"{type(exc).__name__}: {exc}", "tokens_per_s": None}
        engine = self._engines()["ar"]
        ours = engine.generate([p], n)[0]
        rows["specir_ar"] = {"tokens": len(ours.tokens), "tokens_per_s": len(ours.tokens) / engine.timings["decode_s"],
                             "same_tokens_as_generate": ours.tokens == outputs.get("generate", [])[: len(ours.tokens)],
                             "assisted_same_as_generate": outputs.get("assisted") == outputs.get("generate")}
        return rows


# ---------------------------------------------------------------------- output
def _f(x, nd=2):
    return "-" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))


def markdown(data: dict) -> str:
    s = data["sections"]
    env = s.get("env", {})
    lines = [f"# specir GPU bench ({data['date']})", "", f"Command: `{data['command']}`", "",
             f"GPU: {env.get('gpu', '?')}; torch {env.get('torch', '?')}, triton {env.get('triton', '?')}, "
             f"transformers {env.get('transformers', '?')}", ""]
    if "copy" in s:
        lines += [f"Copy bandwidth: {s['copy']['copy_bandwidth_TBps']:.2f} TB/s", ""]
    if "models" in s:
        m = s["models"]
        lines += [f"Weights: {m['source']} ({m['target']}, drafter 1B-16L {m['drafter']}"
                  + (f", drafter 1B-3L {m['drafter_3l']}" if m.get("drafter_3l") else "") + f"). {m.get('note', '')}", ""]
    if "ar_step" in s:
        lines += ["## AR step (batch 1)", "", "| context | Triton step ms | roofline ms | x roofline | "
                  "without the fusions (UNFUSED) ms |", "|---:|---:|---:|---:|---:|"]
        for r in s["ar_step"]["triton"]:
            lines.append(f"| {r['context']} | {_f(r['triton_step_ms'], 3)} | {_f(r['roofline_ms'], 3)} | "
                         f"{_f(r['x_roofline'])} | {_f(r.get('unfused_step_ms'), 3)} |")
        for r in s["ar_step"]["torch"]:
            lines.append(f"| {r['context']} (torch+cuBLAS+graph) | {_f(r.get('torch_cublas_graph_ms'), 3)} | | "
                         f"{_f(r.get('x_roofline'))} | {r.get('error', '')}")
        lines.append("")
    if "breakdown" in s:
        b = s["breakdown"]
        lines += [f"## AR forward by launch group (context {b['context']}; each group timed alone)", "",
                  f"forward {b['forward_ms']:.3f} ms, step {b['step_ms']:.3f} ms, groups alone sum "
                  f"{b['sum_of_groups_alone_ms']:.3f} ms, roofline {b['roofline_ms']:.3f} ms, "
                  f"{b['launches_per_forward']} launches per forward", "",
                  "| group | launches | ms | byte floor ms | floor / ms |", "|---|---:|---:|---:|---:|"]
        for r in b["groups"]:
            lines.append(f"| {r['group']} | {r['launches']} | {_f(r['ms'], 3)} | {_f(r['byte_floor_ms'], 3)} | "
                         f"{_f(r['share_of_copy_bw'])} |")
        lines.append("")
    if "verify" in s:
        lines += ["## Verify cost (target forward + argmax over a random tree)", "",
                  "| context | nodes | ms | x 1 node | x AR step | linear kernel |", "|---:|---:|---:|---:|---:|---|"]
        for r in s["verify"]["rows"]:
            lines.append(f"| {r['context']} | {r['nodes']} | {_f(r['ms'], 3)} | {_f(r['x_one_node'])} | "
                         f"{_f(r['x_ar_step'])} | {r.get('linear', '')} |")
        lines.append("")
    if "packed_attn" in s:
        a = s["packed_attn"]
        lines += [f"## Packed verify attention (one layer, {a['requests']} requests x {a['rows_per_request']} rows "
                  f"in a {a['bucket']}-row bucket, context {a['context']}, {a['heads']}/{a['kv_heads']} heads x "
                  f"{a['head_dim']})", "", "| mode | ms | grid | KV-once floor ms |", "|---|---:|---|---:|"]
        for mode in ("grouped", "per_row"):
            lines.append(f"| {mode} | {_f(a[mode + '_ms'], 4)} | {a['configs'][mode]['grid']} | "
                         f"{_f(a['kv_once_floor_ms'], 4)} |")
        lines.append("")
    if "draft" in s:
        lines += [f"## Step cost (context {s['draft']['context']})", "",
                  "| pipeline | drafter | step ms | verify nodes | verify forward ms | draft + accept ms | "
                  "drafter forward ms (one token / catch-up / tree level) |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for name, r in s["draft"]["steps"].items():
            if isinstance(r, dict) and "skipped" in r:
                lines.append(f"| {name} | | skipped ({r['skipped']}) | | | | |")
            elif isinstance(r, dict):
                fwd = " / ".join(_f(r.get(k), 3) for k in ("drafter_one_token_ms", "drafter_catch_up_ms",
                                                              "drafter_level_ms") if k in r)
                lines.append(f"| {name} | {r.get('drafter') or '-'} | {_f(r['step_ms'], 3)} | {r['verify_nodes']} | "
                             f"{_f(r['verify_forward_ms'], 3)} | {_f(r['draft_and_accept_ms'], 3)} | {fwd} |")
        for name, r in s["draft"]["steps"].items():
            if isinstance(r, dict) and r.get("level_groups"):
                lines += ["", f"{name}: one drafter tree level by launch group (each group timed alone)", "",
                          "| group | launches | ms | byte floor ms | floor / ms |", "|---|---:|---:|---:|---:|"]
                lines += [f"| {g['group']} | {g['launches']} | {_f(g['ms'], 4)} | {_f(g['byte_floor_ms'], 4)} | "
                          f"{_f(g['share_of_copy_bw'])} |" for g in r["level_groups"]]
        roofs = [f"{label} {_f(s['draft']['steps'].get(key), 3)} ms" for label, key in
                 (("1B-16L", "drafter_roofline_ms"), ("1B-3L", "drafter_3l_roofline_ms")) if key in s["draft"]["steps"]]
        lines += ["", "Drafter forward byte floor (weights + KV at this context): " + ", ".join(roofs)]
        lines.append("")
    if "e2e" in s:
        lines += ["## End to end (specir.runtime.bench; AR tok/s in each row's `ar_tokens_per_s`; token forcing on "
                  "every output)", "",
                  "chain / tree use the 1B-16L drafter, chain-3l / tree-3l the 1B-3L one (both embed the trained 3-layer "
                  "drafter function-preservingly: nearly the same proposals and tau; the drafting cost differs).", "",
                  "| workload | pipeline | drafter | tok/s | tau | speedup | mismatches | near-ties |",
                  "|---|---|---|---:|---:|---:|---:|---:|"]
        for r in s["e2e"]["rows"]:
            if "skipped" in r:
                lines.append(f"| | {r['pipeline']} | | skipped | | | | |")
                continue
            lines.append(f"| {r['workload']} (batch {r['batch_size']}) | {r['pipeline']} | {r.get('drafter') or '-'} | "
                         f"{_f(r['tokens_per_s'], 1)} | {_f(r['tau'])} | "
                         f"{_f(r['speedup'])} | {r['mismatches']} | {r['near_ties']} |")
        lines.append("")
    if "peers" in s:
        lines += ["## Peers (same weights)", "", "| engine | tok/s |", "|---|---:|"]
        for name, r in s["peers"].items():
            lines.append(f"| {name} | {_f(r.get('tokens_per_s'), 1)} | {r.get('error', '')}")
        lines.append("")
    for name, why in data.get("skipped", {}).items():
        lines.append(f"- skipped {name}: {why}")
    for name, err in data.get("errors", {}).items():
        lines.append(f"- FAILED {name}: {err.splitlines()[0]}")
    return "\n".join(lines) + "\n"


def summary(data: dict) -> str:
    s = data["sections"]
    out = [f"GPU: {s.get('env', {}).get('gpu', '?')}   weights: {s.get('models', {}).get('source', '?')}"]
    if "copy" in s:
        out.append(f"copy bandwidth          {s['copy']['copy_bandwidth_TBps']:.2f} TB/s")
    for r in s.get("ar_step", {}).get("triton", []):
        out.append(f"AR step ctx {r['context']:<5}      {r['triton_step_ms']:.3f} ms = {r['x_roofline']:.2f}x roofline "
                   f"({r['roofline_ms']:.3f} ms); unfused {r['unfused_step_ms']:.3f} ms")
    for r in s.get("ar_step", {}).get("torch", []):
        if "error" in r:
            out.append(f"torch+cuBLAS+graph failed: {r['error'][:80]}")
            continue
        out.append(f"torch+cuBLAS+graph {r['context']:<5} {r['torch_cublas_graph_ms']:.3f} ms = "
                   f"{r['x_roofline']:.2f}x roofline")
    for r in s.get("verify", {}).get("rows", []):
        if r["nodes"] in (64, 128):
            out.append(f"verify {r['nodes']:>3} nodes ctx {r['context']:<5} {r['ms']:.3f} ms = {r['x_ar_step']:.2f}x AR step")
    if "packed_attn" in s:
        a = s["packed_attn"]
        out.append(f"packed attention {a['requests']}x{a['rows_per_request']} ctx {a['context']}: grouped "
                   f"{a['grouped_ms']:.4f} ms, per row {a['per_row_ms']:.4f} ms (KV-once floor "
                   f"{a['kv_once_floor_ms']:.4f} ms)")
    for name, r in s.get("draft", {}).get("steps", {}).items():
        if isinstance(r, dict) and "step_ms" in r:
            out.append(f"step {name:8s} ({r.get('drafter') or 'no drafter'}) {r['step_ms']:.3f} ms: verify "
                       f"{r['verify_forward_ms']:.3f} + draft/accept {r['draft_and_accept_ms']:.3f}")
    for r in s.get("e2e", {}).get("rows", []):
        if "skipped" not in r:
            out.append(f"{r['workload']:16s} b{r['batch_size']:<3} {r['pipeline']:8s} {r['tokens_per_s']:8.1f} tok/s "
                       f"(AR {r['ar_tokens_per_s']:.1f})  tau {r['tau']:.2f}  speedup {_f(r['speedup'])}  "
                       f"mismatches {r['mismatches']}")
    for name, r in s.get("peers", {}).items():
        out.append(f"peer {name:18s} {_f(r.get('tokens_per_s'), 1):>8} tok/s {r.get('error', '')[:60]}")
    for name in data.get("errors", {}):
        out.append(f"FAILED section: {name}")
    for name in data.get("skipped", {}):
        out.append(f"skipped section: {name}")
    return "\n".join(out)


def run(z: Sizes, args, out: str, budget_s: float, argv, fake_timer: bool = False) -> dict:
    report = Report(out, budget_s, argv, getattr(args, "skip", None) or ())
    bench = Bench(z, args, report, Clock(z.device, z.reps, fake=fake_timer))
    report.run("env", bench.env)
    report.run("copy", bench.copy)
    if report.run("models", bench.models) is None:
        return report.data
    report.run("ar_step", bench.ar_step, need_s=20)
    report.run("breakdown", bench.breakdown, need_s=20)
    report.run("verify", bench.verify, need_s=30)
    report.run("packed_attn", bench.packed_attn, need_s=5)
    report.run("draft", bench.draft, need_s=30)
    report.run("e2e", bench.e2e, need_s=40)
    report.run("peers", bench.peers, need_s=30)
    report.data["total_s"] = round(time.time() - report.start, 1)
    report.write()
    return report.data


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for gpu_bench.json / gpu_bench.md")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and prompts (about half the time)")
    parser.add_argument("--random-8b", action="store_true",
                        help="random weights of the 8B / 1B shapes instead of the inflated zoo pair")
    parser.add_argument("--budget-s", type=float, default=480.0,
                        help="wall-time budget; sections that would not fit are skipped (default 480)")
    parser.add_argument("--skip", nargs="*", default=[], metavar="SECTION",
                        help="sections to leave out (ar_step breakdown verify packed_attn draft e2e peers)")
    parser.add_argument("--e2e", default="", metavar="W:PROMPTS:TOKENS:BATCHES:PIPELINES",
                        help="the e2e section on `specir bench`'s settings, for the agreement check: e.g. "
                             "code-completion:8:96:1,8:tree-3l,chain-3l (workload: one, several joined by '+', or "
                             "all; --limit per workload, --max-new-tokens, --batch-size, pipelines)")
    parser.add_argument("--passes", default="", metavar="PIPELINE",
                        help="passes run on every pipeline before the backend policy, e.g. "
                             "'fusion{attention_prefetch=true}' (the A/B of a fusion; the AR step's unfused row "
                             "states every fusion flag itself)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: no CUDA GPU (the CPU smoke test runs this script at tiny shapes)", file=sys.stderr)
        return 2
    z = dataclasses.replace(Sizes(**(QUICK if args.quick else {})), passes=args.passes)
    if args.e2e:
        workload, prompts, tokens, batches, names = args.e2e.split(":")
        workloads = z.workloads if workload == "all" else tuple(workload.split("+"))
        z = dataclasses.replace(z, workloads=workloads, prompts_per_workload=int(prompts), max_new=int(tokens),
                                batch_sizes=tuple(int(b) for b in batches.split(",")),
                                e2e_pipelines=tuple(names.split(",")))
    data = run(z, args, args.out, args.budget_s, ["bench/gpu_bench.py"] + argv)
    print(summary(data), flush=True)
    return 0 if not data["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
