"""Agents that write passes: any model through litellm (`--agent MODEL`, `--agent-base-url URL`).

Contract: `ask(model, base_url, context) -> (source or None, note)`: one chat completion whose
prompt holds the cost model's gap report, the current best IR (its step and model headers), the
pass API with an example, and the memory's nearest mechanisms; the reply's first ```python block
(or the whole reply) is the pass's source. This module never runs or imports the source: the
search writes it into its folder and evaluates it in the sandbox.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

API = '''A pass is a Python class (specir.pass_infra.Pass): a kebab-case `name`, typed `options`
(Option(type, default, doc, choices=None, min=None, max=None, search=None)), the facts it
`requires`/`provides`, and `run(pipeline) -> pipeline`. The IR is immutable frozen dataclasses
(specir.ir.nodes: Pipeline(name, attrs, models, step), Step(params, ops), Op(name, operands, attrs,
result, type)); build new nodes with dataclasses.replace and Attrs.set(key=value). The verifier runs
after your pass. Step ops: draft.chain @m {k}, draft.ngram {k, min_ngram, max_ngram},
draft.tree @m {depth, topk, budget, expand, threshold}, verify.chain/verify.tree @target,
accept.greedy/accept.sample, commit {kv}. The declared target (the final verify's model, its
source and digest) must not change: every output token is checked against it by token forcing.'''

EXAMPLE = '''from dataclasses import replace
from specir.pass_infra import Option, Pass

class WidenDraft(Pass):
    name = "widen-draft"
    options = {"extra": Option(int, 1, "tokens to add to each draft", min=0, max=8, search=(1, 2))}

    def run(self, pipeline):
        ops = [replace(op, attrs=op.attrs.set(k=op.attrs["k"] + self.extra)) if op.name == "draft.chain" else op
               for op in pipeline.step.ops]
        return replace(pipeline, step=replace(pipeline.step, ops=tuple(ops)))
'''


def ir_summary(text: str, max_lines: int = 60) -> str:
    """The pipeline's header, each model's header and first lines, and the whole step."""
    lines, out, in_model, shown = text.splitlines(), [], False, 0
    for line in lines:
        if line.startswith("  model "):
            in_model, shown = True, 0
            out.append(line)
            continue
        if in_model:
            if line == "  }":
                in_model = False
                out.append("    ...\n  }")
            elif shown < 4:
                out.append(line)
                shown += 1
            continue
        out.append(line)
    return "\n".join(out[:max_lines * 4])


def prompt(context: dict) -> list[dict]:
    nearest = "\n".join(f"- {m['pipeline'] or '(no passes)'}: {m['speedup']:.2f}x, tau {m['tau']:.2f}"
                        + (f"\n```python\n{m['pass_source']}\n```" if m.get("pass_source") else "")
                        for m in context.get("nearest") or []) or "- none yet"
    user = (f"Deployment: {json.dumps(context['deployment'])}\n\n"
            f"Cost model gap report for the current best pipeline `{context['best_passes'] or '(no passes)'}` "
            f"(measured {context['best_speedup']:.2f}x over autoregressive decoding):\n"
            f"{json.dumps(context['gap'], indent=1)}\n\n"
            f"Current IR:\n```\n{ir_summary(context['ir'])}\n```\n\n"
            f"The pass API:\n{API}\n\nExample pass:\n```python\n{EXAMPLE}```\n\n"
            f"Validated mechanisms of the nearest deployments:\n{nearest}\n\n"
            "Write ONE new pass that closes the biggest gap without changing any output token. Reply with a "
            "single ```python block defining it.")
    return [{"role": "system", "content": "You write compiler passes for specir, a compiler for lossless "
                                          "speculative-decoding pipelines."},
            {"role": "user", "content": user}]


def extract(reply: str) -> str:
    blocks = re.findall(r"```(?:python|py)?\s*\n(.*?)```", reply, re.S)
    return (blocks[0] if blocks else reply).strip() + "\n"


def ask(model: str, base_url: str | None, context: dict, timeout: float = 120.0) -> tuple[str | None, str]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        return None, "litellm is not installed (pip install 'specir[search]')"
    kwargs = {"model": model, "messages": prompt(context), "timeout": timeout, "num_retries": 0}
    if base_url:
        kwargs.update(api_base=base_url, api_key=os.environ.get("OPENAI_API_KEY") or "specir-local")
    try:
        response = litellm.completion(**kwargs)
        text = response.choices[0].message.content or ""
    except Exception as exc:  # noqa: BLE001 - any provider error is this call's note
        return None, f"the agent call failed: {type(exc).__name__}: {str(exc)[:300]}"
    return extract(text), f"{len(text)} characters from {model}"


def write(folder: Path, n: int, source: str) -> Path:
    path = folder / "agent" / f"pass_{n:03d}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path
