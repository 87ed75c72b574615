"""The cost model's verdict on two-level verification at a production shape, before any GPU time.

    python bench/two_level_predict.py [--target h200] [--shape llama-3.1-8b] [--drafter-shape llama-1b-width-3l]
                                      [--workloads code-completion,refactor] [--limit 8] [--max-new-tokens 96]
                                      [--context 512] [--json OUT.json]

Acceptance is measured, never assumed: the shipped zoo pair's target decodes the workload's prompts
(plain greedy decoding, reference backend on the CPU), the drafter ranks every continuation token
(acceptance_model.profile) and each mid level ranks them too (acceptance_model.region_ranks: the
zoo target's first k layers with its final norm and head, exactly what two-level-verify{layers}
derives). Costs are the production shape's: the pipelines are rebuilt at `--shape` (target) and
`--drafter-shape` from their configs alone (no weights: the cost model reads shapes), the way
`specir zoo inflate` embeds the pair: its real layers spread evenly over the big depth, so a
`layers = L` mid level of the big target holds the small target's real layers below L and its
acceptance is that small prefix's. Prints, per workload and batch size, the predicted tau, step
time and speedup over AR of the best one-level pipelines and the two-level variants, at batch 1
(the cost model prices one request's step; it has no batch dimension yet).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace


class _AnyShape(tuple):
    """A shape that matches whatever config.json implies (shape-only import)."""

    def __ne__(self, other):
        return False

    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__


class _ShapeOnly(dict):
    def get(self, name, default=None):
        from pathlib import Path

        from specir.importers.checkpoint import TensorInfo
        return TensorInfo("bf16", _AnyShape(), Path("<shape-only>"))


def shaped_model(name: str, shape_name: str, source: str):
    """A Llama model region at a zoo shape, from its config alone (no checkpoint)."""
    from dataclasses import asdict

    from specir.importers.llama import build_llama
    from specir.zoo.shapes import get_shape
    s = asdict(get_shape(shape_name))
    config = {k: v for k, v in s.items() if k not in ("name", "note")}
    config.update(model_type="llama", rms_norm_eps=1e-5, torch_dtype="bfloat16")
    return build_llama(config, _ShapeOnly(), name=name, source=source)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="h200")
    ap.add_argument("--shape", default="llama-3.1-8b")
    ap.add_argument("--drafter-shape", default="llama-1b-width-3l")
    ap.add_argument("--workloads", default="code-completion,refactor")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--json")
    a = ap.parse_args(argv)

    from specir import acceptance_model
    from specir.calibration import Calibration
    from specir.cli.cmd_init import pipeline_text
    from specir.load import load_pipeline
    from specir.pass_infra import PassManager, build_passes
    from specir.prediction import mid_level, predict
    from specir.runtime.baseline import ar_pipeline
    from specir.runtime.session import make_engine
    from specir.targets import get_target
    from specir.zoo import workloads
    from specir.zoo.inflate import layer_positions
    from specir.zoo.paths import zoo_model_dir
    from specir.zoo.shapes import get_shape
    from specir.zoo.tokenizer import load_tokenizer
    sys.path.insert(0, ".")
    from passes.two_level_verify import layer_prefix

    small = load_pipeline("<zoo>", text=pipeline_text("zoo", "zoo:code-target", "zoo:code-drafter", 4))
    small_target = small.model("target")
    n_small = sum(op.name == "attention" for op in small_target.graph.ops)
    n_big = get_shape(a.shape).num_hidden_layers
    positions = layer_positions(n_small, n_big)
    tok = load_tokenizer(zoo_model_dir("code-target") / "tokenizer.json")
    target = get_target(a.target)
    calibration = Calibration.from_target(target)

    models = []
    for m in small.models:
        shape = a.shape if m.name == "target" else a.drafter_shape
        models.append(replace(shaped_model(m.name, shape, str(m.attrs["source"])), attrs=m.attrs))
    big = replace(small, models=tuple(models))
    tree = "tree-verify{budget=64,topk=8,depth=6}"
    variants = {"chain k=4 (one level)": "", "tree 64 (one level)": tree}
    for k in range(1, n_small):
        L = positions[k]  # the big mid keeps the big layers below the k-th real one: k real layers
        variants[f"two-level layers={L} ({k} real)"] = f"two-level-verify{{layers={L}}}"
        variants[f"tree + two-level layers={L}"] = f"{tree},two-level-verify{{layers={L},extend=2}}"
    variants["ngram k=8 -> drafter -> target"] = "two-level-verify{kind=model,model=drafter,extend=4},ngram-draft{k=8}"
    variants["ngram k=12 -> drafter (extend 6) -> target"] = ("two-level-verify{kind=model,model=drafter,extend=6},"
                                                              "ngram-draft{k=12}")

    ar = make_engine(ar_pipeline(small, stock=False), "reference", "cpu", None)
    rows = []
    for w in [w for w in a.workloads.split(",") if w]:
        prompts = [tok.encode(r["prompt"]).ids for r in workloads.load(w)[:a.limit]]
        conts = [r.tokens for r in ar.generate(prompts, a.max_new_tokens)]
        profile = acceptance_model.profile(small.model("drafter"), prompts, conts)
        small_mid = {}
        for k in range(1, n_small):
            small_mid[positions[k]] = acceptance_model.region_ranks(layer_prefix(small_target, k), profile)
        for label, passes in variants.items():
            p = PassManager(build_passes(passes)).run(big) if passes else big
            two = mid_level(p)
            if two is not None:  # the big mid region ranks as its small counterpart does
                mid = p.model(two[1].symbols[0])
                if mid.name == "mid":
                    ranks = small_mid[int(mid.attrs["layers"])]
                else:
                    ranks = acceptance_model.region_ranks(small.model(mid.name), profile)
                profile.mids[acceptance_model.region_key(mid)] = ranks
            pred = predict(p, target, calibration, profile, context=a.context)
            rows.append({"workload": w, "batch": 1, "pipeline": label, "passes": passes, **pred.as_dict()})
    print("| workload | batch | pipeline | predicted tau | step ms | AR ms | predicted speedup |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['batch']} | {r['pipeline']} | {r['tau']:.2f} | {r['step_seconds'] * 1e3:.2f} | "
              f"{r['ar_step_seconds'] * 1e3:.2f} | {r['speedup']:.2f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
