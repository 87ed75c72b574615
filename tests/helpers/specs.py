"""Writing pipelines and prompt files for tests."""
from __future__ import annotations

import json
import random
from pathlib import Path

from specir.pipeline_template import pipeline_text
from specir.ir.printer import print_pipeline
from specir.load import load_pipeline
from specir.pass_infra import PassManager, build_passes


def write_spec(folder: Path, name: str, target, drafter="ngram", k: int = 4, passes: str = "",
               dtype: str | None = None) -> Path:
    """A pipeline like `specir init` writes (chain or n-gram), optionally run through passes."""
    text = pipeline_text(name, str(target), str(drafter), k)
    if dtype:
        text = text.replace(")\n", f') attributes {{dtype = "{dtype}"}}\n', 2 if drafter != "ngram" else 1)
    pipeline = load_pipeline("<test>", text=text)
    if passes:
        pipeline = PassManager(build_passes(passes)).run(pipeline)
    path = Path(folder) / f"{name}.spec"
    path.write_text(print_pipeline(pipeline))
    return path


def write_prompts(folder: Path, count: int, vocab: int, *, seed: int = 0, repetitive: bool = False) -> Path:
    """`count` prompt_ids lines; repetitive prompts repeat a short motif (n-gram friendly)."""
    rng = random.Random(seed)
    path = Path(folder) / f"prompts_{seed}_{count}{'_rep' if repetitive else ''}.jsonl"
    with open(path, "w") as f:
        for _ in range(count):
            if repetitive:
                motif = [rng.randrange(vocab) for _ in range(rng.randint(3, 6))]
                ids = (motif * 4)[: rng.randint(10, 20)]
            else:
                ids = [rng.randrange(vocab) for _ in range(rng.randint(2, 12))]
            f.write(json.dumps({"prompt_ids": ids, "note": "ignored"}) + "\n")
    return path
