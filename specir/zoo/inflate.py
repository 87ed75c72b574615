"""`specir zoo inflate`: embed a small Llama model function-preservingly into a production shape.

Construction (h = small width, H = big width, r = H / h, a power of two >= 2):
- Residual stream: big dim `m*h + j` (m < r) carries `s[m, j] * x_j`, where x is the small
  model's residual and s a fixed random sign pattern. So the big residual is an isometric copy
  of the small one spread over all H dims, never a zero block.
- Writers (embedding rows, o_proj and down_proj rows) hold `s * W` (copies, scale 1).
- Readers (q/k/v/gate/up columns, lm_head columns) hold `beta * s * W` and RMSNorm weights
  `gamma * g` repeated over the copies, with `r * beta * gamma == 1` (powers of two, so every
  trained value is exact in bf16): the big model computes the small model's numbers exactly,
  up to summation order. rms_norm_eps is unchanged because the residual keeps its scale.
- Padding heads and units: q/k/up/o/down entries are realistic random values; v_proj and
  gate_proj rows of padding heads/units are random values in *pairs* `(a, -s s' a)` across
  copies, exactly orthogonal to the residual subspace, so padding heads and units output
  (numerically) zero and their other weights can be anything.
- Extra layers: all heads and units are padding (v and gate rows orthogonal), so the layer adds
  ~0 to the residual; norms and all other matrices are realistic random values.
- Extra vocabulary: lm_head rows are random convex combinations of trained rows (so their logit
  is a weighted mean of real logits, never above the maximum) plus an orthogonal random part;
  embedding rows of extra tokens are random (the tokenizer never produces them).
"Realistic random values" are draws from the trained tensor of the same role (random sign),
scaled like the trained part of the big tensor, so std and bf16 exponent histograms match.
Real layers are spread evenly over the big depth; heads map one to one (same head_dim and GQA
ratio, real kv head i -> big kv head i with its query group).

Output: a Hugging Face folder (config.json, one safetensors shard per layer plus embedding and
head shards, model.safetensors.index.json, the tokenizer files, inflation.json), written layer
by layer so that memory holds one layer at a time.
"""
from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import torch

from specir.build_folder import atomic_build, check_output
from specir.errors import SpecirError
from specir.zoo.progress import Progress
from specir.zoo.shapes import Shape
from specir.zoo.small_model import load_small_model
from specir.zoo.weight_stats import TensorStats

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "generation_config.json")
ROPE_KEYS = ("rope_type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor",
             "original_max_position_embeddings")


class Embedder:
    """The maps of one inflation: sign pattern, scales, random sources (see module docstring)."""

    def __init__(self, h: int, r: int, device: torch.device, seed: int):
        self.h, self.r, self.H = h, r, h * r
        k = int(math.log2(r))
        self.beta = 2.0 ** -math.ceil(k / 2)
        self.gamma = 2.0 ** -math.floor(k / 2)
        self.device = device
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)
        signs = torch.randint(0, 2, (r, h), generator=self.gen, device=device) * 2 - 1
        self.signs = signs.to(torch.float32)          # [r, h]
        self.flat_signs = self.signs.reshape(-1)      # index m*h + j

    def writer(self, w: torch.Tensor) -> torch.Tensor:
        """[h, n] rows of a matrix that writes the residual -> [H, n]."""
        return w.float().repeat(self.r, 1) * self.flat_signs[:, None]

    def embedding(self, e: torch.Tensor) -> torch.Tensor:
        """[v, h] residual vectors -> [v, H]."""
        return e.float().repeat(1, self.r) * self.flat_signs[None, :]

    def reader(self, w: torch.Tensor, scale: float | None = None) -> torch.Tensor:
        """[n, h] columns of a matrix that reads the normed residual -> [n, H]."""
        scale = self.beta if scale is None else scale
        return w.float().repeat(1, self.r) * (self.flat_signs[None, :] * scale)

    def norm(self, g: torch.Tensor, scale: float | None = None) -> torch.Tensor:
        return g.float().repeat(self.r) * (self.gamma if scale is None else scale)

    def sample(self, reference: torch.Tensor, shape: tuple[int, ...], scale: float) -> torch.Tensor:
        """Random values drawn from `reference`'s entries, random sign, times `scale`."""
        flat = reference.reshape(-1).float().to(self.device)
        out = torch.empty(shape, device=self.device)
        if out.numel() == 0:
            return out
        rows = max(1, (1 << 26) // max(1, out[0].numel())) if out.dim() > 1 else out.shape[0]
        for start in range(0, shape[0], rows):  # chunks bound the int64 index memory
            part = out[start:start + rows]
            idx = torch.randint(0, flat.numel(), part.shape, generator=self.gen, device=self.device)
            sign = torch.randint(0, 2, part.shape, generator=self.gen, device=self.device) * 2 - 1
            part.copy_(flat[idx] * sign * scale)
        return out

    def orthogonal_rows(self, reference: torch.Tensor, count: int, scale: float) -> torch.Tensor:
        """`count` random rows of width H, exactly orthogonal to the residual subspace."""
        a = self.sample(reference, (count, self.r // 2, self.h), scale)
        pair_sign = -(self.signs[0::2] * self.signs[1::2])  # [r/2, h]
        rows = torch.empty(count, self.r, self.h, device=self.device)
        rows[:, 0::2] = a
        rows[:, 1::2] = a * pair_sign[None]
        return rows.reshape(count, self.H)


def check_compatible(cfg, shape: Shape) -> int:
    """The width ratio r, or a SpecirError saying why `cfg` does not embed in `shape`."""
    def fail(what: str, hint: str):
        raise SpecirError(f"the small model does not embed into {shape.name}: {what}", hint=hint)

    if cfg.head_dim != shape.head_dim:
        fail(f"head_dim {cfg.head_dim} != {shape.head_dim}", "train it with the shape's head_dim")
    if cfg.num_attention_heads * shape.num_key_value_heads != shape.num_attention_heads * cfg.num_key_value_heads:
        fail("GQA ratios differ", "train it with the shape's query heads per kv head")
    rope = cfg.rope_parameters or {}
    for key in ROPE_KEYS:
        a, b = rope.get(key), shape.rope_parameters.get(key)
        if a != b and not (isinstance(a, (int, float)) and isinstance(b, (int, float)) and
                           math.isclose(a, b)):
            fail(f"rope parameter {key} is {a}, the shape's is {b}", "train it with the shape's rope")
    for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                 "intermediate_size", "vocab_size"):
        if getattr(cfg, name) > getattr(shape, name):
            fail(f"{name} {getattr(cfg, name)} exceeds {getattr(shape, name)}", "pick a larger shape")
    r = shape.hidden_size // cfg.hidden_size
    if shape.hidden_size % cfg.hidden_size or r < 2 or r & (r - 1):
        fail(f"hidden {shape.hidden_size} is not a power-of-two multiple (>= 2) of {cfg.hidden_size}",
             "the residual copies need H / h in {2, 4, 8, ...}")
    if shape.tie_word_embeddings and not cfg.tie_word_embeddings:
        fail("the shape ties embeddings but the small model does not",
             "train the small model with tied embeddings")
    return r


def layer_positions(small_layers: int, big_layers: int) -> list[int]:
    """Big-layer index of each small layer, spread evenly, the first at 0."""
    return [(k * big_layers) // small_layers for k in range(small_layers)]


def _layer(E: Embedder, small: dict, cfg, shape: Shape, real: bool, sabotage: str | None
           ) -> dict[str, torch.Tensor]:
    """The big tensors of one layer from the small layer `small` (real) or as padding (extra)."""
    d = shape.head_dim
    nq, nkv, ni = cfg.num_attention_heads * d, cfg.num_key_value_heads * d, cfg.intermediate_size
    Nq, Nkv, NI = shape.num_attention_heads * d, shape.num_key_value_heads * d, shape.intermediate_size
    H, b = E.H, E.beta
    q, k, v, o = (small[f"self_attn.{n}_proj.weight"] for n in "qkvo")
    gate, up, down = (small[f"mlp.{n}_proj.weight"] for n in ("gate", "up", "down"))
    gamma = 1.0 if sabotage == "no-norm-rescale" else None
    out = {}
    if real:
        out["self_attn.q_proj.weight"] = torch.cat([E.reader(q), E.sample(q, (Nq - nq, H), b)])
        out["self_attn.k_proj.weight"] = torch.cat([E.reader(k), E.sample(k, (Nkv - nkv, H), b)])
        out["self_attn.v_proj.weight"] = torch.cat([E.reader(v), E.orthogonal_rows(v, Nkv - nkv, b)])
        out["self_attn.o_proj.weight"] = torch.cat([E.writer(o), E.sample(o, (H, Nq - nq), 1.0)], 1)
        out["mlp.gate_proj.weight"] = torch.cat([E.reader(gate), E.orthogonal_rows(gate, NI - ni, b)])
        out["mlp.up_proj.weight"] = torch.cat([E.reader(up), E.sample(up, (NI - ni, H), b)])
        out["mlp.down_proj.weight"] = torch.cat([E.writer(down), E.sample(down, (H, NI - ni), 1.0)], 1)
        for n in ("input_layernorm", "post_attention_layernorm"):
            out[f"{n}.weight"] = E.norm(small[f"{n}.weight"], gamma)
    else:
        out["self_attn.q_proj.weight"] = E.sample(q, (Nq, H), b)
        out["self_attn.k_proj.weight"] = E.sample(k, (Nkv, H), b)
        out["self_attn.v_proj.weight"] = E.orthogonal_rows(v, Nkv, b)
        out["self_attn.o_proj.weight"] = E.sample(o, (H, Nq), 1.0)
        out["mlp.gate_proj.weight"] = E.orthogonal_rows(gate, NI, b)
        out["mlp.up_proj.weight"] = E.sample(up, (NI, H), b)
        out["mlp.down_proj.weight"] = E.sample(down, (H, NI), 1.0)
        for n in ("input_layernorm", "post_attention_layernorm"):
            g = small[f"{n}.weight"]
            out[f"{n}.weight"] = E.norm(E.sample(g, (cfg.hidden_size,), 1.0).abs(), gamma)
    if sabotage == "break-signs" and real:
        out["self_attn.o_proj.weight"][: E.h] *= -1
    return out


def _lm_head(E: Embedder, lm: torch.Tensor, vocab: int, beta: float, chunk: int = 8192) -> torch.Tensor:
    """[vocab, H]: real rows, then rows that are convex combinations of real rows plus an
    orthogonal random part (their logit never exceeds the largest real logit)."""
    v = lm.shape[0]
    parts = [E.reader(lm, beta)]
    lm_f = lm.float().to(E.device)
    for start in range(v, vocab, chunk):
        n = min(chunk, vocab - start)
        pick = torch.randint(0, v, (n, 16), generator=E.gen, device=E.device)
        weights = torch.rand(n, 16, generator=E.gen, device=E.device)
        weights = weights / weights.sum(1, keepdim=True)
        mix = torch.einsum("nk,nkh->nh", weights, lm_f[pick])
        parts.append(E.reader(mix, beta) + E.orthogonal_rows(lm, n, beta))
    return torch.cat(parts)


def _save_shard(tensors: dict[str, torch.Tensor], path: Path) -> int:
    from safetensors.torch import save_file

    cpu = {k: t.to(torch.bfloat16).contiguous().cpu() for k, t in tensors.items()}
    save_file(cpu, str(path), metadata={"format": "pt"})
    return sum(t.numel() * 2 for t in cpu.values())


def final_norm_scale(shape: Shape, E: Embedder, sabotage: str | None = None) -> float:
    """The final RMSNorm weight's scale: 1/r when the lm_head is the (unscaled) embedding, else gamma."""
    if sabotage == "no-norm-rescale":
        return 1.0
    return (1.0 / E.r) if shape.tie_word_embeddings else E.gamma


def inflated_shards(cfg, weights: dict[str, torch.Tensor], shape: Shape, E: Embedder,
                    sabotage: str | None = None):
    """The small model's `weights` embedded into `shape`, one shard at a time and in the order of
    E's random draws: yields (tensors, trained_of) for the embedding, each layer, then the final
    norm (with an untied lm_head). `inflate` writes them to disk; bench/gpu_bench.py keeps them in
    memory. trained_of maps each tensor to the trained one it embeds (for the statistics)."""
    positions = layer_positions(cfg.num_hidden_layers, shape.num_hidden_layers)
    real_at = {p: k for k, p in enumerate(positions)}
    embed = weights["model.embed_tokens.weight"]
    lm = weights.get("lm_head.weight", embed)
    if shape.tie_word_embeddings:  # lm_head rows are the embedding rows: scale 1 on both
        emb_big = _lm_head(E, embed, shape.vocab_size, 1.0)
    else:
        emb_big = torch.cat([E.embedding(embed),
                             E.sample(embed, (shape.vocab_size - cfg.vocab_size, E.H), 1.0)])
    yield {"model.embed_tokens.weight": emb_big}, {"model.embed_tokens.weight": embed}
    del emb_big

    for i in range(shape.num_hidden_layers):
        k = real_at.get(i)
        src = k if k is not None else max(kk for p, kk in real_at.items() if p <= i)
        prefix = f"model.layers.{src}."
        small = {n[len(prefix):]: t for n, t in weights.items() if n.startswith(prefix)}
        tensors = _layer(E, small, cfg, shape, k is not None, sabotage)
        yield ({f"model.layers.{i}.{n}": t for n, t in tensors.items()},
               {f"model.layers.{i}.{n}": small[n] for n in tensors})

    tail = {"model.norm.weight": E.norm(weights["model.norm.weight"], final_norm_scale(shape, E, sabotage))}
    trained_tail = {"model.norm.weight": weights["model.norm.weight"]}
    if not shape.tie_word_embeddings:
        tail["lm_head.weight"] = _lm_head(E, lm, shape.vocab_size, E.beta)
        trained_tail["lm_head.weight"] = lm
    yield tail, trained_tail


def inflated_files(folder: Path) -> set[str] | None:
    """The files a previous `inflate` wrote into `folder` (config, index, its shards, tokenizer,
    inflation.json), or None when `folder` holds no inflated model. Only those may be replaced."""
    index = folder / "model.safetensors.index.json"
    if not (folder / "inflation.json").is_file() or not index.is_file():
        return None
    try:
        shards = set(json.loads(index.read_text())["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return {"config.json", "inflation.json", index.name, *TOKENIZER_FILES, *(s for s in shards if isinstance(s, str))}


def inflate(small_dir: Path, shape: Shape, out: Path, *, device: str = "cpu", seed: int = 0,
            sabotage: str | None = None, log=print) -> dict:
    """Write the inflated model of `small_dir` in `shape` to `out`; returns the report
    (provenance and per-tensor statistics). `sabotage` ("no-norm-rescale", "break-signs")
    deliberately breaks the embedding, for tests of the agreement check."""
    from transformers import LlamaConfig

    out = Path(out)
    check_output(out, inflated_files, "an inflated model", "--out")  # before any work
    cfg, weights = load_small_model(small_dir)
    r = check_compatible(cfg, shape)
    dev = torch.device(device)
    weights = {name: t.to(dev) for name, t in weights.items()}
    E = Embedder(cfg.hidden_size, r, dev, seed)
    positions = layer_positions(cfg.num_hidden_layers, shape.num_hidden_layers)
    with atomic_build(out, inflated_files, "an inflated model", "--out") as tmp:
        n_layers = shape.num_hidden_layers
        width = len(str(n_layers + 2))
        shard_name = lambda i: f"model-{i:0{width}d}-of-{n_layers + 2:0{width}d}.safetensors"
        weight_map, total_bytes = {}, 0
        stats: dict[str, TensorStats] = {}
        progress = Progress(n_layers + 2, f"inflate {shape.name}", every_s=5.0, unit=" shards")
        start = time.perf_counter()

        def emit(index: int, tensors: dict[str, torch.Tensor], trained_of: dict[str, torch.Tensor]):
            nonlocal total_bytes
            for name, tensor in tensors.items():
                role = name.split(".")[-2] if "layers." in name else name.split(".")[-2]
                stats.setdefault(role, TensorStats(role)).add(tensor, trained_of.get(name))
            total_bytes += _save_shard(tensors, tmp / shard_name(index))
            weight_map.update({name: shard_name(index) for name in tensors})
            progress.update(1)

        for index, (tensors, trained_of) in enumerate(inflated_shards(cfg, weights, shape, E, sabotage)):
            emit(index, tensors, trained_of)
        final_scale = final_norm_scale(shape, E, sabotage)
        progress.close()

        (tmp / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total_bytes}, "weight_map": dict(sorted(weight_map.items()))},
            indent=1))
        big_cfg = LlamaConfig(
            vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
            intermediate_size=shape.intermediate_size, num_hidden_layers=n_layers,
            num_attention_heads=shape.num_attention_heads, num_key_value_heads=shape.num_key_value_heads,
            head_dim=shape.head_dim, max_position_embeddings=shape.max_position_embeddings,
            rms_norm_eps=cfg.rms_norm_eps, rope_parameters=dict(cfg.rope_parameters),
            tie_word_embeddings=shape.tie_word_embeddings, bos_token_id=cfg.bos_token_id,
            eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id, hidden_act="silu",
            attention_bias=False, mlp_bias=False)
        big_cfg.architectures = ["LlamaForCausalLM"]
        big_cfg.dtype = "bfloat16"
        big_cfg.save_pretrained(str(tmp))
        for name in TOKENIZER_FILES:
            if (small_dir / name).exists():
                shutil.copy2(small_dir / name, tmp / name)
        report = {
            "small": str(small_dir), "shape": shape.name, "seed": seed, "sabotage": sabotage,
            "width_ratio": r, "reader_scale": E.beta, "norm_scale": E.gamma,
            "final_norm_scale": final_scale, "real_layer_positions": positions,
            "parameters": shape.parameters(), "bytes": total_bytes,
            "seconds": round(time.perf_counter() - start, 1),
            "tensors": {role: s.summary() for role, s in stats.items()},
        }
        (tmp / "inflation.json").write_text(json.dumps(report, indent=1))
    log(f"inflate: wrote {out} ({total_bytes / 1e9:.2f} GB, {report['seconds']} s)")
    return report
