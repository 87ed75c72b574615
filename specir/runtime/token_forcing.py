"""Differential token testing by token forcing (DESIGN.md section 7).

For every token t_i a pipeline produced after prompt P, the reference (the stock target, plain
decoding, same dtype) is run on P + t_1 .. t_{i-1} and must choose t_i. All positions of one
sequence are checked with one causal forward (teacher forcing). Where the reference's argmax
differs, the token passes only as a near-tie: the reference's logit gap between its argmax and
t_i is at most the tolerance; near-ties are counted and reported. Anything else is a mismatch.
The default tolerance is a few units in the last place of the dtype at the position's largest
logit: `abs + rel * max|logit|` (bf16: 1/16 + 2^-6 |l|, i.e. two bf16 ulps; f16: 1/64 + 2^-9 |l|;
f32: 1e-4 + 1e-5 |l|). `--tolerance X` replaces it by a fixed gap X.

References: `transformers` (AutoModelForCausalLM on the declared target's checkpoint, the
default), or `ir` (that checkpoint freshly imported, no passes, on the reference kernels), in the
declared dtype. A produced id outside the vocabulary is a mismatch; positions where the reference's
logits are not finite are counted (`non_finite`): the guard fails them.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace

import torch

from ..declared_target import DeclaredTarget
from ..errors import SpecirError
from .dtypes import torch_dtype

DEFAULT_TOLERANCE = {"f32": (1e-4, 1e-5), "f16": (2.0 ** -6, 2.0 ** -9), "bf16": (2.0 ** -4, 2.0 ** -6)}


@dataclass
class SequenceReport:
    index: int
    checked: int = 0
    near_ties: list = field(default_factory=list)  # (position, produced, reference, gap)
    mismatches: list = field(default_factory=list)
    non_finite: int = 0  # positions whose reference logits hold NaN or inf

    @property
    def ok(self) -> bool:
        return not self.mismatches


@dataclass
class ForcingReport:
    tolerance: str
    reference: str
    sequences: list[SequenceReport]

    @property
    def checked(self) -> int:
        return sum(s.checked for s in self.sequences)

    @property
    def mismatches(self) -> int:
        return sum(len(s.mismatches) for s in self.sequences)

    @property
    def near_ties(self) -> int:
        return sum(len(s.near_ties) for s in self.sequences)

    @property
    def non_finite(self) -> int:
        return sum(s.non_finite for s in self.sequences)

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and self.non_finite == 0

    def as_dict(self) -> dict:
        return {"ok": self.ok, "tokens_checked": self.checked, "mismatches": self.mismatches,
                "near_ties": self.near_ties, "non_finite": self.non_finite, "tolerance": self.tolerance,
                "reference": self.reference,
                "sequences": [{"index": s.index, "checked": s.checked, "near_ties": s.near_ties,
                               "mismatches": s.mismatches} for s in self.sequences]}


_SHARED: dict = {}  # Reference.shared's one kept reference


class Reference:
    """Logits of the declared target's checkpoint for whole sequences: [T, V] for ids [T]."""

    def __init__(self, declared: DeclaredTarget, device: str, kind: str = "auto"):
        from ..importers import resolve_source
        folder = resolve_source(declared.source)
        self.dtype_name = declared.dtype
        self.device = device
        self.kind = kind
        if kind in ("auto", "transformers"):
            try:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from transformers import AutoModelForCausalLM
                from transformers.utils import logging as hf_logging
                hf_logging.disable_progress_bar()
                self.model = AutoModelForCausalLM.from_pretrained(
                    str(folder), dtype=torch_dtype(self.dtype_name),
                    device_map=device if str(device).startswith("cuda") else None).to(device).eval()
                self.kind = "transformers"
                return
            except Exception as exc:
                if kind == "transformers":
                    raise SpecirError(f"transformers cannot load the target {folder}: {exc}", path=str(folder),
                                      hint="use --reference ir to check against the imported graph") from None
        from ..backends_api import kernel_table
        from ..importers import import_model
        from .weights import load_weights
        fresh = import_model(declared.model, declared.source)
        fresh = replace(fresh, attrs=fresh.attrs.set(dtype=self.dtype_name))
        self.fresh, self.weights, self.kernels = fresh, load_weights(fresh, device), kernel_table()
        self.kind = "ir"

    @classmethod
    def shared(cls, declared: DeclaredTarget, device: str, kind: str = "auto") -> "Reference":
        """The reference of `declared` on `device`, kept for the next call with the same declared
        target (its digest included), device and kind: a search's worker judges every candidate
        against one model load. One is kept at a time (a target's weights are large)."""
        key = (json.dumps(declared.as_dict(), sort_keys=True), str(device), kind)
        if _SHARED.get("key") != key:
            _SHARED.clear()
            _SHARED.update(key=key, reference=cls(declared, device, kind))
        return _SHARED["reference"]

    @classmethod
    def of_model(cls, model, device: str, kind: str = "auto") -> "Reference":
        """The reference for an expanded model region's checkpoint (`source`) in its dtype."""
        declared = DeclaredTarget(model.name, str(model.attrs["source"]), "", str(model.attrs.get("dtype", "bf16")))
        return cls(declared, device, kind)

    @torch.no_grad()
    def logits(self, ids: list[int]) -> torch.Tensor:
        x = torch.tensor([ids], device=self.device)
        if self.kind == "transformers":
            return self.model(x).logits[0].float()
        from .model_runner import ModelRunner
        # one chain forward, nothing committed: a recurrent state ring of one node suffices
        runner = ModelRunner(self.fresh, self.weights, slots=1, max_seq=len(ids) + 1, state_nodes=1,
                             device=self.device, kernels=self.kernels)
        return runner.forward([0], x, torch.arange(len(ids), device=self.device)[None])[0].float()


def force(reference: Reference, prompts: list[list[int]], outputs: list[list[int]],
          tolerance: float | None = None) -> ForcingReport:
    abs_tol, rel_tol = DEFAULT_TOLERANCE.get(reference.dtype_name, (0.1, 0.0)) if tolerance is None \
        else (tolerance, 0.0)
    described = f"{abs_tol:g} + {rel_tol:g}*max|logit|" if rel_tol else f"{abs_tol:g}"
    reports = []
    for i, (prompt, out) in enumerate(zip(prompts, outputs)):
        rep = SequenceReport(i)
        if out:
            seq = list(prompt) + list(out[:-1])
            logits = reference.logits(seq)[len(prompt) - 1:]
            finite = torch.isfinite(logits).all(-1).tolist()
            best = logits.argmax(-1).tolist()
            bound = (abs_tol + rel_tol * logits.abs().amax(-1)).tolist()
            vocab = logits.shape[-1]
            for j, tok in enumerate(out):
                rep.checked += 1
                if not finite[j]:
                    rep.non_finite += 1
                    continue
                if best[j] == tok:
                    continue
                gap = float(logits[j, best[j]] - logits[j, tok]) if 0 <= tok < vocab else float("inf")
                entry = {"position": j, "produced": tok, "reference": best[j], "gap": round(gap, 6) if gap != float("inf") else None,
                         "bound": round(bound[j], 6)}
                (rep.near_ties if gap <= bound[j] else rep.mismatches).append(entry)
        reports.append(rep)
    return ForcingReport(described, reference.kind, reports)
