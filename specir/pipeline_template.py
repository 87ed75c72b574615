"""The pipeline `specir init` writes, and the shipped default pair's (what `run` uses without a spec).

Contract: `pipeline_text(name, target, drafter, k)` is a parseable .spec: @target imported from
`target`, a `draft.chain` of k tokens from @drafter (or `draft.ngram` when drafter == "ngram", or no
draft at all when drafter == "none": autoregressive decoding, the baseline a pass such as
pack-weights is measured on alone), `verify.chain` on @target, `accept.sample`, `commit`; with `mid`,
also `model @mid` imported from it (unused until `two-level-verify{kind=model,model=mid}` puts it
between draft and verify).
`default_spec_text()` is that text for the zoo pair.
"""
from __future__ import annotations

import json


def pipeline_text(name: str, target: str, drafter: str, k: int, mid: str | None = None) -> str:
    if drafter == "none":
        models = f'  model @target = import({_quote(target)})\n'
        draft = ""
    elif drafter == "ngram":
        models = f'  model @target = import({_quote(target)})\n'
        draft = f"    %draft = draft.ngram %ctx {{k = {k}}}\n"
    else:
        models = f'  model @target = import({_quote(target)})\n  model @drafter = import({_quote(drafter)})\n'
        draft = f"    %draft = draft.chain @drafter, %ctx {{k = {k}}}\n"
    if mid is not None:
        models += f'  model @mid = import({_quote(mid)})\n'
    drafted = ", %draft" if draft else ""
    return (f"pipeline {name} {{\n{models}  step(%ctx: context) {{\n{draft}"
            f"    %logits = verify.chain @target, %ctx{drafted}\n"
            f"    %accepted = accept.sample {'%draft, ' if draft else ''}%logits\n"
            "    commit %ctx, %accepted\n  }\n}\n")


def default_spec_text() -> str:
    return pipeline_text("code", "zoo:code-target", "zoo:code-drafter", 4)


def _quote(path: str) -> str:
    return json.dumps(path, ensure_ascii=False)  # the IR's strings are JSON strings (any path, newlines included)
