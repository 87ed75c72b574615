"""The judging side of the guard: `python -m specir.guard.judge` runs in a fresh process that
imports no plugin, whatever the caller's process has imported.

Contract: `run_guard(request) -> Verdict` judges in the calling process when that process has
imported no plugin and no entry point (`specir check` never does: plugins are the child's
business), else in a fresh `python -m specir.guard.judge` process. The judge:
1. reads the declared target of `request.source` (guard/declared.py: a build's manifest, or the
   .spec's own text), never from anything the candidate pipeline computes;
2. has `python -m specir.guard.child` (the only process that imports plugins) generate for the
   prompts the caller chose, within `request.timeout` seconds;
3. counts what came back: one output per prompt, each of exactly `max_new_tokens` tokens unless it
   ends early with an end-of-sequence id of the declared checkpoint (its config.json); fewer tokens
   than asked (zero included) fail, saying how many and why;
4. checks the checkpoint's digest again (nothing rewrote it meanwhile), loads it fresh from the
   checkpoint, once per declared target with its digest in a process (Reference.shared; the digest is
   checked again at every call)
   (transformers where it loads it, else the freshly imported IR graph on the reference kernels)
   in the declared dtype and token-forces every token (runtime/token_forcing.py); non-finite
   reference logits fail, since nothing can be proved against them.
The verdict passes only when every asked token was produced and checked and none mismatched.
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..declared_target import DeclaredTarget
from ..errors import SpecirError
from .process import run_stage, stage_main


@dataclass
class GuardRequest:
    source: str | None  # a build folder, a .spec, or None for the shipped default pipeline
    prompts: list[list[int]]
    max_new_tokens: int
    target: str | None = None  # target for a .spec compiled on the fly
    passes: str = ""
    plugins: list[str] = field(default_factory=list)
    batch_size: int = 1
    tolerance: float | None = None
    reference: str = "auto"  # auto | transformers | ir
    device: str = "cpu"  # where the reference runs
    timeout: float | None = None  # seconds for generation; None: no limit
    default_text: str = ""  # the pipeline text used when source is None
    sandbox: list[str] = field(default_factory=list)  # command prefix the generating child runs under
    sandbox_folder: str | None = None  # where the child's job and result files live (writable inside it)

    def job(self) -> dict:
        return {"source": self.source, "target": self.target, "passes": self.passes,
                "plugins": [str(Path(p).resolve()) for p in self.plugins], "prompts": self.prompts,
                "max_new_tokens": self.max_new_tokens, "batch_size": self.batch_size}


@dataclass
class Verdict:
    declared: DeclaredTarget
    asked: int
    produced: int
    reasons: list[str]  # why it fails (empty when it passes)
    forcing: dict  # ForcingReport.as_dict(), or {} when nothing was forced
    meta: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.reasons and bool(self.forcing) and bool(self.forcing.get("ok"))

    @property
    def checked(self) -> int:
        return int(self.forcing.get("tokens_checked", 0))

    def as_dict(self) -> dict:
        forcing = self.forcing or {"tokens_checked": 0, "mismatches": 0, "near_ties": 0, "non_finite": 0,
                                   "sequences": []}
        return {**forcing, "ok": self.ok, "tokens_asked": self.asked, "tokens_produced": self.produced,
                "reasons": self.reasons, "declared_target": self.declared.as_dict(), **self.meta}


class GenerationFailed(SpecirError):
    """A guard process reported an error: its own formatted message is shown as it is."""

    def __init__(self, text: str):
        super().__init__(text.split("\n", 1)[0])
        self.text = text

    def format(self) -> str:
        return self.text


def run_guard(request: GuardRequest) -> Verdict:
    """Judge `request` here when this process is clean, else in a fresh process (module docstring)."""
    from ..pass_infra import foreign_code_loaded
    if foreign_code_loaded():
        result = run_stage("specir.guard.judge", asdict(request))
    else:
        result = judge(asdict(request))
    if "error" in result:
        raise GenerationFailed(str(result["error"]))
    if "verdict" not in result:
        raise SpecirError(f"the judge process ended without a verdict ({result})",
                          hint="rerun; if it repeats, run with --debug and report it")
    v = result["verdict"]
    return Verdict(DeclaredTarget.from_dict(v["declared"]), v["asked"], v["produced"], v["reasons"], v["forcing"],
                   v["meta"])


# ---------------------------------------------------------------------- in the judge process

def _eos_ids(folder: Path) -> set[int]:
    from ..importers.checkpoint import read_config
    eos = read_config(folder).get("eos_token_id")
    if eos is None:
        return set()
    return {int(e) for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int)}


def count_outputs(prompts, outputs, max_new: int, eos: set[int]) -> tuple[int, int, list[str]]:
    """(asked, produced, reasons): every prompt must get max_new tokens, or fewer ending in an eos id."""
    reasons, asked, produced = [], len(prompts) * max_new, 0
    if not isinstance(outputs, list) or len(outputs) != len(prompts):
        got = len(outputs) if isinstance(outputs, list) else 0
        return asked, 0, [f"the pipeline returned {got} outputs for {len(prompts)} prompts"]
    short = []
    for i, out in enumerate(outputs):
        if not isinstance(out, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in out):
            reasons.append(f"output {i} is not a list of token ids")
            continue
        produced += min(len(out), max_new)
        if len(out) > max_new:
            reasons.append(f"prompt {i}: {len(out)} tokens for max-new-tokens {max_new}")
        elif len(out) < max_new and not (out and out[-1] in eos):
            short.append(f"prompt {i}: {len(out)} of {max_new}")
    if short:
        reasons.append(f"asked for {asked} tokens, the pipeline produced {produced}: " + "; ".join(short[:5])
                       + (f"; and {len(short) - 5} more" if len(short) > 5 else "")
                       + " (shorter without an end-of-sequence token)")
    return asked, produced, reasons


def judge(job: dict) -> dict:
    from ..importers import resolve_source
    from ..importers.digest import checkpoint_digest
    from ..runtime.token_forcing import Reference, force
    from .declared import declared_of
    request = GuardRequest(**job)
    declared = declared_of(request.source, request.default_text)
    folder = Path(resolve_source(declared.source))
    eos = _eos_ids(folder)
    result = run_stage("specir.guard.child", request.job(), request.timeout, request.sandbox, request.sandbox_folder)
    if "error" in result:
        raise GenerationFailed(str(result["error"]))
    meta = {k: result[k] for k in ("backend", "target", "seconds") if k in result}
    asked = len(request.prompts) * request.max_new_tokens

    def verdict(produced, reasons, forcing=None):
        return {"verdict": {"declared": declared.as_dict(), "asked": asked, "produced": produced,
                            "reasons": reasons, "forcing": forcing or {}, "meta": meta}}

    if result.get("timeout"):
        return verdict(0, [f"generation did not finish within {request.timeout:g} s"])
    if "outputs" not in result:
        return verdict(0, [f"the pipeline's process exited (status {result.get('died')}) without a result"])
    outputs = result["outputs"]
    asked, produced, reasons = count_outputs(request.prompts, outputs, request.max_new_tokens, eos)
    if checkpoint_digest(folder) != declared.digest:
        return verdict(produced, reasons + [f"the declared target's checkpoint {declared.source} changed while the "
                                            f"pipeline ran"])
    if not isinstance(outputs, list) or len(outputs) != len(request.prompts):
        return verdict(produced, reasons)
    outputs = [[int(t) for t in o[:request.max_new_tokens]] if isinstance(o, list) and
               all(isinstance(t, int) for t in o) else [] for o in outputs]
    reference = Reference.shared(declared, request.device, request.reference)
    report = force(reference, request.prompts, outputs, request.tolerance)
    if report.non_finite:
        reasons.append(f"the reference's logits are not finite at {report.non_finite} positions (the checkpoint's "
                       f"weights hold NaN or inf): nothing can be proved against it")
    if report.checked < produced:
        reasons.append(f"only {report.checked} of {produced} produced tokens were checked")
    meta["reference"] = reference.kind
    return verdict(produced, reasons, report.as_dict())


if __name__ == "__main__":
    sys.exit(stage_main(judge, sys.argv[1:]))
