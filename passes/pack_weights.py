"""pack-weights: linear layers read BF12 (lossless 12-bit) weights where the format pays.

Preconditions: model graphs are expanded (imported) and each model's `source` names its
checkpoint (a relative path is resolved against the .spec file's folder). For every candidate
matrix the pass asks `specir.bf12.decision.decide_for` whether BF12 pays, from the checkpoint's
header (shape, dtype) and the matrix's BF12 statistics, which are read (one tensor at a time,
memory-mapped) and analysed once per file version (specir.bf12.stats_cache).

Postconditions, per packed weight: its declaration is `bf12[N, K]` (same shape) and every
`linear` reading it is `packed_linear {format = "bf12"}` (bias unchanged). A weight that stays
bf16 carries a note saying why, `{bf12 = "kept: <reason>"}`: not bf16, too small, heavily sparse,
exponents too spread (many raw rows), read by a non-linear op (an lm_head tied to the embedding
table, which `embed` reads raw), or matched by `skip`. Weights no `linear` reads are untouched.
Outputs are unchanged bit for bit (BF12 round-trips every bf16 pattern). Provides the fact
`packed-weights`; prints a one-line summary on stderr.

Options: `format` (bf12); `skip`: weight-name patterns (fnmatch, `;`-separated) to keep bf16;
`models`: model names (`;`-separated) to pack, default all; `max_bits`, `max_zeros`,
`min_weights`: the thresholds of `specir.bf12.decide`.

Before:
    model @target attributes {source = "ckpt"} {
      weight "emb" : bf16[512, 128]
      weight "up" : bf16[256, 128]
      weight "down" : bf16[128, 256]
      ...
      %u = linear %x {weight = "up"} : act<256>
      %d = linear %u {weight = "down"} : act<128>
      %lg = linear %n {weight = "emb"} : logits<512>
After (pack-weights), when `down` is 40% zeros:
      weight "emb" : bf16[512, 128] {bf12 = "kept: tied to the embedding table, which embed reads raw"}
      weight "up" : bf12[256, 128]
      weight "down" : bf16[128, 256] {bf12 = "kept: heavily sparse (40.0% zeros)"}
      ...
      %u = packed_linear %x {format = "bf12", weight = "up"} : act<256>
      %d = linear %u {weight = "down"} : act<128>
      %lg = linear %n {weight = "emb"} : logits<512>
"""
from __future__ import annotations

import fnmatch
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from specir.errors import SpecirError
from specir.ir.nodes import Model, Pipeline, Weight
from specir.ir.types import TensorType
from specir.pass_infra import Option, Pass

NOTE = "bf12"  # weight attribute that says why a weight stays bf16
# specir.bf12.decide's thresholds, literal so that loading the pass registry does not import torch
# (tests/bf12_pipeline checks that they agree)
MAX_BITS_PER_WEIGHT, MAX_ZERO_FRACTION, MIN_ELEMENTS = 13.0, 0.25, 8192
LINEAR_OPS = ("linear", "packed_linear")


@dataclass(frozen=True)
class Verdict:
    pack: bool
    note: str            # "" when packed, else why it stays bf16 (without "kept: ")
    weights: int         # number of weights
    bits: float = 16.0   # bits per weight as stored (BF12 bits when packed)


def split_list(text: str) -> list[str]:
    return [p.strip() for p in text.replace(",", ";").split(";") if p.strip()]


def spec_folder(pipeline: Pipeline) -> Path:
    """The folder relative `source` paths are resolved against: the .spec file's, else the cwd."""
    src = pipeline.source_file
    return Path(src).parent if src and not src.startswith("<") else Path.cwd()


def short_reason(reason: str) -> str:
    """decide()'s reason without its ': keep bf16' / advice tail, for the IR note."""
    for tail in (": keep bf16", " to be worth a packed kernel"):
        reason = reason.replace(tail, "")
    return reason


def _torch_dtype(name: str):
    """The torch dtype of a checkpoint dtype name ("bf16"), or the name where torch has none here."""
    import torch
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}.get(name, name)


class CheckpointReader:
    """Reads single tensors of one model's checkpoint (safetensors, memory-mapped)."""

    def __init__(self, model: Model, base: Path):
        from specir.importers.checkpoint import tensor_index
        from specir.runtime.weights import model_folder
        self.model = model
        self.folder = model_folder(model, base)
        self.index = tensor_index(self.folder, model.loc)

    def _info(self, name: str):
        info = self.index.get(name)
        if info is None:
            raise SpecirError(f"weight {name!r} of @{self.model.name} is not in the checkpoint {self.folder}",
                              location=self.model.loc, path=str(self.folder),
                              hint="the pipeline and the checkpoint disagree; re-run specir init")
        return info

    def header(self, name: str) -> tuple[tuple[int, ...], str]:
        """Weight `name`'s shape and dtype as its safetensors header gives them (no bytes read)."""
        info = self._info(name)
        return info.shape, info.dtype

    def stats(self, name: str):
        """BF12 statistics of weight `name`, cached per file version (specir.bf12.stats_cache)."""
        from specir.bf12.stats_cache import checkpoint_stats
        info = self._info(name)
        try:
            return checkpoint_stats(info.file, name, lambda: self.read(name))
        except OSError as exc:
            raise SpecirError(f"cannot read weight {name!r} from {info.file.name}: {exc.strerror or exc}",
                              location=self.model.loc, path=str(info.file),
                              hint="the checkpoint's file is missing or unreadable") from None

    def read(self, name: str):
        from safetensors import safe_open
        info = self._info(name)
        try:
            with safe_open(str(info.file), framework="pt", device="cpu") as f:
                return f.get_tensor(name)
        except (OSError, RuntimeError, ValueError) as exc:
            raise SpecirError(f"cannot read weight {name!r} from {info.file.name}: {exc}", path=str(info.file),
                              hint="the file is truncated or corrupt") from None


class PackWeights(Pass):
    name = "pack-weights"
    options = {
        "format": Option(str, "bf12", "packed weight format", ("bf12",)),
        "skip": Option(str, "", "weight-name patterns (fnmatch, ';'-separated) that stay bf16",
                       search=("", "*lm_head*")),
        "models": Option(str, "", "models to pack (';'-separated names); default: every model",
                         search=("", "target", "drafter")),
        "max_bits": Option(float, MAX_BITS_PER_WEIGHT, "keep bf16 above this many BF12 bits per weight",
                           min=0.0, search=(MAX_BITS_PER_WEIGHT,)),
        "max_zeros": Option(float, MAX_ZERO_FRACTION, "keep bf16 above this fraction of zeros", min=0.0,
                            search=(MAX_ZERO_FRACTION,)),
        "min_weights": Option(int, MIN_ELEMENTS, "keep bf16 below this many weights", min=0,
                              search=(MIN_ELEMENTS,)),
    }
    provides = frozenset({"packed-weights"})

    def run(self, pipeline: Pipeline) -> Pipeline:
        chosen = self._chosen_models(pipeline)
        base = spec_folder(pipeline)
        models, summary = [], []
        for m in pipeline.models:
            if m.name not in chosen or m.graph is None:
                models.append(m)
                continue
            verdicts = self.decide_model(m, base)
            models.append(rewrite_model(m, verdicts))
            summary.append((m.name, verdicts))
        print(summary_line(summary), file=sys.stderr)
        return replace(pipeline, models=tuple(models))

    def _chosen_models(self, pipeline: Pipeline) -> set[str]:
        names = {m.name for m in pipeline.models}
        wanted = {n.lstrip("@") for n in split_list(self.models)} or names
        unknown = sorted(wanted - names)
        if unknown:
            raise SpecirError(f"no model @{unknown[0]} in this pipeline",
                              hint="models: " + ", ".join("@" + n for n in sorted(names)))
        return wanted

    def decide_model(self, model: Model, base: Path) -> dict[str, Verdict]:
        """name -> Verdict for every weight a `linear` op reads."""
        readers: dict[str, set[str]] = {}
        for op in model.graph.ops:
            if op.attrs.get("weight"):
                readers.setdefault(op.attrs["weight"], set()).add(op.name)
        patterns = split_list(self.skip)
        reader = None
        verdicts = {}
        for name, ops in readers.items():
            if "linear" not in ops:
                continue
            w = model.weight(name)
            count = math.prod(w.type.shape)
            others = sorted(ops - set(LINEAR_OPS))
            matched = next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)
            if others == ["embed"]:
                note = "tied to the embedding table, which embed reads raw"
            elif others:
                note = f"also read by {', '.join(others)}"
            elif matched:
                note = f"matches skip pattern {matched!r}"
            elif "rows_of" in w.attrs:
                note = "rows of another tensor (draft-vocab); run pack-weights before draft-vocab to pack it"
            elif w.type.dtype != "bf16":
                note = f"weights are {w.type.dtype}; BF12 is lossless only for bf16"
            elif len(w.type.shape) == 2 and count < self.min_weights:
                note = f"too small ({count} < {self.min_weights} weights)"
            else:
                from specir.bf12.decision import decide_for
                reader = reader or CheckpointReader(model, base)
                shape, dtype = reader.header(name)  # the checkpoint's own, as decide() saw the tensor's
                d = decide_for(shape, _torch_dtype(dtype), lambda name=name: reader.stats(name),
                               max_bits=self.max_bits, max_zero_fraction=self.max_zeros, min_elements=self.min_weights)
                bits = d.stats.bits_per_weight if d.stats else 16.0
                verdicts[name] = Verdict(d.pack, "" if d.pack else short_reason(d.reason), count,
                                         bits if d.pack else 16.0)
                continue
            verdicts[name] = Verdict(False, note, count)
        return verdicts


def rewrite_model(model: Model, verdicts: dict[str, Verdict]) -> Model:
    weights = []
    for w in model.weights:
        v = verdicts.get(w.name)
        if v is None:
            weights.append(w)
        elif v.pack:
            weights.append(Weight(w.name, TensorType("bf12", w.type.shape), w.attrs.set(**{NOTE: None}), w.loc))
        else:
            weights.append(replace(w, attrs=w.attrs.set(**{NOTE: f"kept: {v.note}"})))
    ops = tuple(op.with_(name="packed_linear", attrs=op.attrs.set(format="bf12"))
                if op.name == "linear" and verdicts.get(op.attrs["weight"], Verdict(False, "", 0)).pack else op
                for op in model.graph.ops)
    return replace(model, weights=tuple(weights), graph=replace(model.graph, ops=ops))


def summary_line(summary: list[tuple[str, dict[str, Verdict]]]) -> str:
    """One line: per model, packed / candidate matrices and bits per weight; the kept weights."""
    parts, kept = [], []
    for name, verdicts in summary:
        packed = [v for v in verdicts.values() if v.pack]
        n = sum(v.weights for v in packed)
        bits = sum(v.bits * v.weights for v in packed) / n if n else 0.0
        text = f"@{name} {len(packed)}/{len(verdicts)} matrices"
        if packed:
            text += f" ({bits:.3f} bits/weight, {16 / bits:.2f}x fewer bytes)"
        parts.append(text)
        kept += [f"@{name} {w} ({v.note})" for w, v in verdicts.items() if not v.pack]
    line = "pack-weights: packed " + ("; ".join(parts) or "nothing (no model graphs)")
    if kept:
        shown = kept[:3] + ([f"{len(kept) - 3} more (see the IR's bf12 notes)"] if len(kept) > 3 else [])
        line += "; kept bf16: " + "; ".join(shown)
    return line
