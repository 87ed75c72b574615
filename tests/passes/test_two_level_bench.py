"""The two-level benchmark scripts' building blocks: long-context prompts cut from the shipped
corpus, and production-shape model regions from configs alone (what the cost model prices)."""
from __future__ import annotations

from tests.helpers.bench_scripts import load_bench_script


def test_long_context_prompts_reach_their_length():
    from specir.importers import resolve_source
    from specir.zoo.tokenizer import load_tokenizer
    script = load_bench_script("long_context")
    tok = load_tokenizer(resolve_source("zoo:code-target") / "tokenizer.json")
    rows = script.long_prompts(tok, 600, 2)
    assert len(rows) == 2 and all(600 <= r["tokens"] == len(r["prompt_ids"]) < 1200 for r in rows)
    assert rows[0]["prompt_ids"] != rows[1]["prompt_ids"]


def test_shape_only_regions_price_the_8b_shape():
    from specir.zoo.shapes import get_shape
    script = load_bench_script("two_level_predict")
    model = script.shaped_model("target", "llama-3.1-8b", "zoo:code-target")
    n = sum(w.type.shape[0] * (w.type.shape[1] if len(w.type.shape) > 1 else 1) for w in model.weights)
    assert n == get_shape("llama-3.1-8b").parameters()
    assert sum(op.name == "attention" for op in model.graph.ops) == 32
