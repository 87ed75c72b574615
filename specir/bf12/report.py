"""Bits per weight of BF12, every stored byte counted, for the matrices pack-weights packs:

    python -m specir.bf12.report [--rows 256] [--exact] [--device cuda] [--out docs/BF12_BITS.md]

1. the shipped pair (zoo code-target, code-drafter): every linear matrix, exact;
2. the zoo target inflated to the Llama-3.1-8B shape (`specir zoo inflate`'s construction), per
   matrix role over the 32 layers and the lm_head;
3. Gaussian N(0, 0.02) matrices of each Llama-3.1-8B linear shape, and the whole 8B step.

Bits come from `stats.stored_bytes(N, K, raw_rows)` (planes, raw rows, safetensors header and
offsets), so only the number of raw rows is measured. By default (2, 3) it is *estimated* from
row samples at the exact [N, K]: BF12 decides raw vs packed per row, and the rows of each stratum
(trained rows, random padding rows, Gaussian rows) are identically distributed, so
raw_rows ~= raw rows in a sample of `--rows` rows x rows in the stratum. Inflated layers: all six
real layers are sampled, plus one extra layer per real layer that its extra layers copy from
(`inflate` fills extra layer i from the last real layer before it), weighted by how many extra
layers copy it. `--exact` builds every inflated matrix with `specir.zoo.inflate` itself and
packs it whole (use `--device cuda`: on a CPU that takes about half an hour).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .stats import analyze, stored_bytes

STEP_SHAPES_8B = {  # role: (N, K, matrices per step) at Llama-3.1-8B
    "q_proj": (4096, 4096, 32), "k_proj": (1024, 4096, 32), "v_proj": (1024, 4096, 32),
    "o_proj": (4096, 4096, 32), "gate_proj": (14336, 4096, 32), "up_proj": (14336, 4096, 32),
    "down_proj": (4096, 14336, 32), "lm_head": (128256, 4096, 1),
}
ROLES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


@dataclass
class RoleTotal:
    """Matrices of one role: weights and estimated stored bytes, summed."""
    role: str
    shape: tuple[int, int] | None = None
    matrices: float = 0.0
    weights: float = 0.0
    bytes: float = 0.0
    raw_rows: float = 0.0     # estimated raw rows, all matrices
    looked: int = 0           # rows measured
    seen: int = 0             # raw rows among them

    def add(self, n: int, k: int, raw_rows: float, count: float = 1.0, looked: int | None = None,
            seen: int | None = None) -> None:
        """`count` matrices [n, k] with `raw_rows` raw rows each, measured on `looked` rows (all by
        default) of which `seen` were raw."""
        self.shape = (n, k)
        self.matrices += count
        self.weights += count * n * k
        self.raw_rows += count * raw_rows
        self.bytes += count * stored_bytes(n, k, round(raw_rows))
        self.looked += n if looked is None else looked
        self.seen += round(raw_rows) if seen is None else seen

    @property
    def bits(self) -> float:
        return 8.0 * self.bytes / self.weights


def raw_rows_of(w: torch.Tensor) -> int:
    """Rows BF12 keeps raw (packs on a GPU, analyses on a CPU: the same count)."""
    if w.is_cuda:
        from .pack import pack
        return pack(w.to(torch.bfloat16)).raw_row_count
    return analyze(w.to(torch.bfloat16).cpu()).raw_rows


def estimate_raw_rows(strata: list[tuple[torch.Tensor, int]]) -> tuple[float, int, int]:
    """(estimated raw rows, rows looked at, raw rows among them) of a matrix given its strata
    (sample rows, rows of the matrix they stand for)."""
    total, looked, seen = 0.0, 0, 0
    for sample, represented in strata:
        if represented == 0 or sample.shape[0] == 0:
            continue
        raw = raw_rows_of(sample)
        total += raw * represented / sample.shape[0]
        looked += sample.shape[0]
        seen += raw
    return total, looked, seen


def add_total(rows: dict[str, RoleTotal]) -> RoleTotal:
    total = RoleTotal("all packed matrices")
    for r in rows.values():
        total.matrices += r.matrices
        total.weights += r.weights
        total.bytes += r.bytes
        total.raw_rows += r.raw_rows
        total.looked += r.looked
        total.seen += r.seen
    return total


# ------------------------------------------------------------------ 1. the shipped pair

def shipped_pair(names=("code-target", "code-drafter")) -> dict[str, dict[str, RoleTotal]]:
    """Per model, per role: every linear matrix analysed whole (what pack-weights packs: an
    lm_head tied to the embedding stays bf16 and is not counted)."""
    from safetensors import safe_open

    from specir.zoo.paths import zoo_model_dir
    out = {}
    for name in names:
        rows: dict[str, RoleTotal] = {}
        with safe_open(str(zoo_model_dir(name) / "model.safetensors"), framework="pt") as f:
            for key in sorted(f.keys()):
                role = key.split(".")[-2]
                if role not in ROLES:
                    continue
                w = f.get_tensor(key)
                rows.setdefault(role, RoleTotal(role)).add(*w.shape, raw_rows_of(w))
        out[name] = rows
    return out


# ------------------------------------------------------------------ 2. the inflated 8B target

def sampled_layer(E, small: dict, cfg, shape, real: bool, rows: int) -> dict[str, tuple[int, int, list]]:
    """role -> (N, K, strata) of one inflated layer, as row samples of `specir.zoo.inflate._layer`'s
    construction: trained rows whole, `rows` random rows of every padding stratum."""
    d = shape.head_dim
    nq, nkv, ni = cfg.num_attention_heads * d, cfg.num_key_value_heads * d, cfg.intermediate_size
    big = {"q_proj": shape.num_attention_heads * d, "k_proj": shape.num_key_value_heads * d,
           "v_proj": shape.num_key_value_heads * d, "gate_proj": shape.intermediate_size,
           "up_proj": shape.intermediate_size}
    small_out = {"q_proj": nq, "k_proj": nkv, "v_proj": nkv, "gate_proj": ni, "up_proj": ni}
    H, b = E.H, E.beta
    w = {r: small[f"self_attn.{r}.weight" if r[0] in "qkvo" else f"mlp.{r}.weight"] for r in ROLES[:-1]}
    out = {}
    for role, n_big in big.items():
        pad = n_big - (small_out[role] if real else 0)
        m = min(rows, pad)
        fill = E.orthogonal_rows(w[role], m, b) if role in ("v_proj", "gate_proj") else E.sample(w[role], (m, H), b)
        strata = [(fill, pad)]
        if real:
            strata.append((E.reader(w[role]), small_out[role]))
        out[role] = (n_big, H, strata)
    for role, k_small, k_big in (("o_proj", nq, big["q_proj"]), ("down_proj", ni, shape.intermediate_size)):
        m = min(rows, H)
        if real:
            idx = torch.randperm(H, generator=E.gen, device=E.device)[:m]
            sample = torch.cat([E.writer(w[role])[idx], E.sample(w[role], (m, k_big - k_small), 1.0)], 1)
        else:
            sample = E.sample(w[role], (m, k_big), 1.0)
        out[role] = (H, k_big, [(sample, H)])
    return out


def inflated(small_dir: Path, shape_name: str = "llama-3.1-8b", rows: int = 256, exact: bool = False,
             device: str = "cpu", seed: int = 0, log=print) -> dict[str, RoleTotal]:
    from specir.zoo.inflate import Embedder, _layer, _lm_head, check_compatible, layer_positions
    from specir.zoo.shapes import get_shape
    from specir.zoo.small_model import load_small_model

    cfg, weights = load_small_model(small_dir)
    shape = get_shape(shape_name)
    r = check_compatible(cfg, shape)
    dev = torch.device(device)
    weights = {n: t.to(dev) for n, t in weights.items()}
    E = Embedder(cfg.hidden_size, r, dev, seed)
    positions = layer_positions(cfg.num_hidden_layers, shape.num_hidden_layers)
    copies = {k: sum(1 for i in range(shape.num_hidden_layers) if i not in positions and
                     max(kk for kk, p in enumerate(positions) if p <= i) == k) for k in range(len(positions))}
    totals = {role: RoleTotal(role) for role in ROLES}
    for k in range(cfg.num_hidden_layers):
        prefix = f"model.layers.{k}."
        small = {n[len(prefix):]: t for n, t in weights.items() if n.startswith(prefix)}
        for real, count in ((True, 1), (False, copies[k])):
            if count == 0:
                continue
            start = time.perf_counter()
            if exact:  # every copy built and measured
                for _ in range(count):
                    for name, t in _layer(E, small, cfg, shape, real, None).items():
                        role = name.split(".")[-2]
                        if role in totals:
                            totals[role].add(*t.shape, raw_rows_of(t))
            else:
                for role, (n, kk, strata) in sampled_layer(E, small, cfg, shape, real, rows).items():
                    raw, looked, seen = estimate_raw_rows(strata)
                    totals[role].add(n, kk, raw, count, looked, seen)
            log(f"  inflated layer from small layer {k} ({'real' if real else f'{count} extra copies'}): "
                f"{time.perf_counter() - start:.1f} s")
    if not shape.tie_word_embeddings:
        lm = weights.get("lm_head.weight", weights["model.embed_tokens.weight"])
        v = lm.shape[0]
        extra = shape.vocab_size - v
        if exact:
            head = _lm_head(E, lm, shape.vocab_size, E.beta)
            totals["lm_head"].add(*head.shape, raw_rows_of(head))
        else:
            head = _lm_head(E, lm, v + min(rows, extra), E.beta)  # real rows, then sampled extra rows
            raw, looked, seen = estimate_raw_rows([(head[:v], v), (head[v:], extra)])
            totals["lm_head"].add(shape.vocab_size, head.shape[1], raw, 1, looked, seen)
    else:
        del totals["lm_head"]  # tied: embed reads it raw, pack-weights keeps it bf16
    return totals


# ------------------------------------------------------------------ 3. Gaussian weights

def gaussian_8b(rows: int = 256, std: float = 0.02, seed: int = 0, device: str = "cpu") -> dict[str, RoleTotal]:
    g = torch.Generator(device=device).manual_seed(seed)
    totals = {}
    for role, (n, k, count) in STEP_SHAPES_8B.items():
        m = min(rows, n) if rows else n
        sample = (torch.randn(m, k, generator=g, device=device) * std).to(torch.bfloat16)
        raw, looked, seen = estimate_raw_rows([(sample, n)])
        totals[role] = RoleTotal(role)
        totals[role].add(n, k, raw, count, looked, seen)
    return totals


# ------------------------------------------------------------------ output

def table(rows: dict[str, RoleTotal]) -> str:
    lines = ["| matrices | shape [N, K] | count | rows measured | raw among them | raw rows per matrix | bits/weight |",
             "|---|---|---|---|---|---|---|"]
    for r in list(rows.values()) + [add_total(rows)]:
        shape = f"{r.shape[0]} x {r.shape[1]}" if r.shape else ""
        per = r.raw_rows / r.matrices if r.matrices else 0.0
        bits = f"**{r.bits:.4f}**" if r.role.startswith("all") else f"{r.bits:.4f}"
        lines.append(f"| {r.role} | {shape} | {r.matrices:g} | {r.looked} | {r.seen} | {per:.2f} | {bits} |")
    return "\n".join(lines)


def step_bytes(rows: dict[str, RoleTotal]) -> tuple[float, float]:
    """(bf16 bytes, BF12 bytes) of the packed matrices."""
    total = add_total(rows)
    return 2.0 * total.weights, total.bytes


def headroom(rows: dict[str, RoleTotal], target: float = 12.35) -> str:
    """How many raw rows the target would allow, next to the fraction measured."""
    total = add_total(rows)
    k = total.weights / sum(r.matrices * r.shape[0] for r in rows.values())  # mean row length
    packed_bits = 8 + 4 + 16 / 128  # planes, base and escape bytes
    allowed = (target - packed_bits) / (16.0 + 32.0 / k - packed_bits)
    return (f"Raw rows measured: {total.seen} of {total.looked} rows ({100 * total.seen / total.looked:.2f}%); "
            f"{target} bits/weight would allow about {100 * allowed:.1f}% raw rows.")


def report(rows: int = 256, exact: bool = False, device: str = "cpu", shape: str = "llama-3.1-8b",
           log=print) -> str:
    from specir.zoo.paths import zoo_model_dir
    from .serialize import VERSION
    from .stats import gaussian_report
    start = time.perf_counter()
    command = "python -m specir.bf12.report" + (f" --rows {rows}" if rows != 256 else "") + \
        (" --exact" if exact else "") + (f" --device {device}" if device != "cpu" else "") + \
        (f" --shape {shape}" if shape != "llama-3.1-8b" else "")
    parts = ["# BF12: bits per weight, all metadata counted", "",
             f"Produced by `{command} --out docs/BF12_BITS.md` (specir/bf12/report.py; its docstring "
             "states the method). Bits = BF12's stored bytes x 8 / weights: the planes (8 + 4 bits per "
             "weight), the base and escape bytes per group of 128, raw bf16 rows with their indices, and the "
             "safetensors header entry and per-tensor offsets of each matrix (`specir.bf12.stats.stored_bytes`). "
             "Matrices: those `pack-weights` packs (every linear weight; an lm_head tied to the embedding "
             "stays bf16 and is not counted; the embedding table is read by `embed` and stays bf16). "
             f"Target: <= 12.35 bits/weight. BF12 format version {VERSION}.", ""]
    log("shipped pair ...")
    for name, rows_of in shipped_pair().items():
        parts += [f"## Shipped pair: zoo `{name}` (every matrix, exact)", "", table(rows_of), ""]
    log(f"inflated {shape} target ...")
    infl = inflated(zoo_model_dir("code-target"), shape, rows=rows, exact=exact, device=device, log=log)
    how = ("every matrix built by `specir.zoo.inflate` and measured whole" if exact else
           f"statistical estimate: exact [N, K], raw rows estimated from samples of {rows} rows per stratum "
           "(see the method above)")
    bf16_b, bf12_b = step_bytes(infl)
    parts += [f"## Zoo target inflated to {shape} (`specir zoo inflate --shape {shape}`)", "",
              f"Construction of `specir/zoo/inflate.py` (seed 0); {how}.", "", table(infl), "",
              f"Linear weights read per AR step: bf16 {bf16_b / 1e9:.3f} GB, BF12 {bf12_b / 1e9:.3f} GB "
              f"({bf16_b / bf12_b:.3f}x fewer bytes; the embedding row and the KV cache come on top).", "",
              headroom(infl), ""]
    if not exact:
        log("sampling check at the test-target shape ...")
        small = {kind: add_total(inflated(zoo_model_dir("code-target"), "test-target", rows=rows, exact=kind == "exact",
                                          device=device, log=lambda m: None)).bits for kind in ("exact", "sampled")}
        parts += [f"Check of the estimate: at the `test-target` shape (same construction, hidden 512, 8 layers, "
                  f"every matrix built and measured whole) the estimate gives {small['sampled']:.4f} bits/weight, "
                  f"the whole matrices {small['exact']:.4f}.", ""]
    log("Gaussian 8B shapes ...")
    gauss = gaussian_8b(rows, device=device)
    whole = gaussian_report()
    bf16_b, bf12_b = step_bytes(gauss)
    parts += ["## Gaussian N(0, 0.02) weights at the Llama-3.1-8B linear shapes", "",
              f"Rows are i.i.d., so a sample of {rows} rows of each shape estimates its raw rows "
              f"(Gaussian 4096 x 4096 matrices have a few raw rows, docs/BF12.md).", "", table(gauss), "",
              f"Per AR step: bf16 {bf16_b / 1e9:.3f} GB, BF12 {bf12_b / 1e9:.3f} GB ({bf16_b / bf12_b:.3f}x).", "",
              headroom(gauss), "",
              f"Check of the sampling: one whole Gaussian 4096 x 4096 matrix (`stats.gaussian_report()`): "
              f"{whole['bits_per_weight']:.4f} bits/weight, {whole['raw_rows']} raw rows.", ""]
    parts.append(f"Report built in {time.perf_counter() - start:.0f} s on {device} (torch {torch.__version__}).")
    return "\n".join(parts) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m specir.bf12.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=256, help="rows sampled per stratum (default 256)")
    p.add_argument("--exact", action="store_true", help="build and pack every inflated matrix whole")
    p.add_argument("--device", default="cpu", help="cpu or cuda (generation; packing on cuda)")
    p.add_argument("--shape", default="llama-3.1-8b", help="the zoo shape to inflate the target to")
    p.add_argument("--out", help="write the markdown here (default: print it)")
    args = p.parse_args(argv)
    text = report(args.rows, args.exact, args.device, args.shape, log=lambda m: print(m, file=sys.stderr))
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
