"""The cost model's step time against H200 measurements, at the 8B shape, on the CPU (no weights).

    python bench/cost_model_check.py [--fit] [--context 300] [--work /tmp/specir-shapes]

Writes shape-only checkpoints of the zoo pair's inflated shapes (llama-3.1-8b target, llama-1b-width-3l
drafter: safetensors headers over sparse zero data, the zoo tokenizer), `specir init`s the pipeline,
and prints per batch size the predicted draft + verify milliseconds of AR, chain k = 4 and
tree-verify{budget=64,topk=8,depth=6} (batch_schedule's prices: cost_model.forward_cost at --context
rows per request) beside the step times measured on the H200 (MEASURED: bench tok/s and tau of
gpu-h200-2026-12-01-session5 call 1), and the shrink tables batch-fusion{shrink=true} writes for
the tree and the chain, for the plain roofline (copy bandwidth and big-GEMM rate, overlapped), the
h200 target's fitted step rates, and with --fit the best rates on a grid (what targets.json holds).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import struct
import subprocess
import sys
from pathlib import Path

MEASURED = {  # ms per decode step = batch * tau / tok/s (AR: batch / tok/s)
    "ar": {1: 4.90, 8: 6.10, 32: 6.69, 64: 7.21},
    "chain": {1: 7.06, 8: 9.02, 32: 11.74, 64: 18.10},
    "tree": {1: 8.62, 8: 25.11, 32: 83.36, 64: 161.0}}
TREE = "tree-verify{budget=64,topk=8,depth=6}"
CONTEXT = 300  # the code-completion prompts: 258 tokens on average, plus half of 96 new ones


def shape_checkpoint(shape_name: str, small: Path, out: Path) -> None:
    """A Llama checkpoint of `shape_name` whose tensors are holes of a sparse file (zeros)."""
    from transformers import LlamaConfig
    from specir.zoo.shapes import SHAPES
    s = SHAPES[shape_name]
    out.mkdir(parents=True, exist_ok=True)
    h, q, kv = s.hidden_size, s.num_attention_heads * s.head_dim, s.num_key_value_heads * s.head_dim
    inter, vocab = s.intermediate_size, s.vocab_size
    shapes = {"model.embed_tokens.weight": [vocab, h], "model.norm.weight": [h]}
    if not s.tie_word_embeddings:
        shapes["lm_head.weight"] = [vocab, h]
    for i in range(s.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": [q, h], p + "self_attn.k_proj.weight": [kv, h],
                       p + "self_attn.v_proj.weight": [kv, h], p + "self_attn.o_proj.weight": [h, q],
                       p + "mlp.gate_proj.weight": [inter, h], p + "mlp.up_proj.weight": [inter, h],
                       p + "mlp.down_proj.weight": [h, inter], p + "input_layernorm.weight": [h],
                       p + "post_attention_layernorm.weight": [h]})
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * shape[0] * (shape[1] if len(shape) > 1 else 1)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.truncate(8 + len(raw) + offset)
    cfg = json.loads((small / "config.json").read_text())
    big = LlamaConfig(vocab_size=vocab, hidden_size=h, intermediate_size=inter, num_hidden_layers=s.num_hidden_layers,
                      num_attention_heads=s.num_attention_heads, num_key_value_heads=s.num_key_value_heads,
                      head_dim=s.head_dim, max_position_embeddings=s.max_position_embeddings,
                      rms_norm_eps=cfg.get("rms_norm_eps", 1e-5), rope_parameters=dict(s.rope_parameters),
                      tie_word_embeddings=s.tie_word_embeddings, bos_token_id=cfg.get("bos_token_id"),
                      eos_token_id=cfg.get("eos_token_id"), hidden_act="silu")
    big.architectures = ["LlamaForCausalLM"]
    big.dtype = "bfloat16"
    big.save_pretrained(str(out))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (small / name).exists():
            shutil.copy2(small / name, out / name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="also grid-search the step rates that fit MEASURED best")
    ap.add_argument("--context", type=int, default=CONTEXT, help="cached rows per request the steps are priced at")
    ap.add_argument("--work", default="/tmp/specir-shapes")
    args = ap.parse_args(argv)
    from specir.batch_schedule import budget_table, draft_seconds, forward_seconds, step_forwards
    from specir.live_table import entry
    from specir.load import load_pipeline
    from specir.pass_infra import PassManager, build_passes
    from specir.targets import get_target
    from specir.zoo.paths import zoo_model_dir

    work = Path(args.work)
    shape_checkpoint("llama-3.1-8b", Path(zoo_model_dir("code-target")), work / "target")
    shape_checkpoint("llama-1b-width-3l", Path(zoo_model_dir("code-drafter")), work / "drafter")
    spec = subprocess.run([sys.executable, "-m", "specir.cli.main", "init", "--target-model", str(work / "target"),
                           "--drafter", str(work / "drafter")], capture_output=True, text=True, check=True).stdout
    base = load_pipeline("<init>", text=spec)
    pipelines = {"chain": (base, 4), "tree": (PassManager(build_passes(TREE)).run(base), 64)}

    def predicted(target) -> dict:
        """(pipeline, batch) -> (draft ms, verify ms) at --context rows per request."""
        out = {}
        for b in (1, 8, 32, 64):
            out["ar", b] = (0.0, 1e3 * forward_seconds(base, "target", b, target, args.context, b))
            for name, (p, n) in pipelines.items():
                verifier, _, drafts = step_forwards(p)
                out[name, b] = (1e3 * draft_seconds(p, drafts, b, target, args.context),
                                1e3 * forward_seconds(p, verifier, b * (1 + n), target, args.context, b))
        return out

    def error(target) -> float:
        """Mean absolute log error of predicted over measured step times."""
        pred = predicted(target)
        return sum(abs(math.log(sum(pred[k]) / MEASURED[k[0]][k[1]])) for k in pred) / len(pred)

    h200 = get_target("h200")
    models = {"the plain roofline (copy bandwidth, big-GEMM rate, overlapped)":
              dataclasses.replace(h200, step_bandwidth=None, step_flops=None, step_serial=0.0, step_row_tile=1),
              "the h200 target's fitted step rates": h200}
    if args.fit:
        grid = [dataclasses.replace(h200, step_bandwidth=bw * 1e11, step_flops=fl * 1e13, step_serial=serial,
                                    step_row_tile=tile)
                for bw in range(25, 45) for fl in range(30, 100, 4) for serial in (0.0, 0.25, 0.5, 1.0)
                for tile in (1, 64, 128)]
        best = min(grid, key=error)
        models["the best fit of --fit"] = best
    for title, target in models.items():
        print(f"\n## {title}: {target.bandwidth / 1e12:.2f} TB/s, {target.flops / 1e12:.0f} TFLOP/s, "
              f"the slower plus {target.step_serial:g} of the other, GEMM rows in tiles of {target.step_row_tile} "
              f"(mean |log error| {error(target):.3f})\n")
        print("| pipeline | batch | predicted draft + verify ms | measured ms | predicted / measured |")
        print("|---|---:|---:|---:|---:|")
        for (name, b), (d, v) in sorted(predicted(target).items(), key=lambda kv: (list(MEASURED).index(kv[0][0]), kv[0][1])):
            shown = f"{v:.1f}" if name == "ar" else f"{d:.1f} + {v:.1f} = {d + v:.1f}"
            print(f"| {name} | {b} | {shown} | {MEASURED[name][b]:.1f} | {(d + v) / MEASURED[name][b]:.2f} |")
        for label, p in (("tree", pipelines["tree"][0]), ("chain", base)):
            for alpha in (0.85, 0.7):
                table = budget_table(p, target, 64, alpha)
                print(f"\n{label} + batch-fusion{{shrink=true,alpha={alpha}}} table (drafted tokens at 1, 8, 16, 32, 48, "
                      f"64 live): {[entry(table, b) for b in (1, 8, 16, 32, 48, 64)]}")
        if target is h200:  # what batch-fusion{narrow=true} writes (the pass prices the registry's h200)
            for alpha in (0.85, 0.7):
                fused = PassManager(build_passes(f"{TREE},batch-fusion{{shrink=true,alpha={alpha},narrow=true}}")).run(base)
                draft = next(op for op in fused.step.ops if op.name == "draft.tree")
                tokens = next(op for op in fused.step.ops if op.name == "batch.budget").attrs["tokens"]
                topk_at = draft.attrs.get("topk_at") or (draft.attrs["topk"],)
                sizes = (1, 8, 16, 32, 48, 64)
                ms = [1e3 * draft_seconds(fused, step_forwards(fused, b)[2], b, target, args.context) for b in sizes]
                print(f"\ntree + batch-fusion{{shrink=true,alpha={alpha},narrow=true}} at 1, 8, 16, 32, 48, 64 live: "
                      f"drafted tokens {[entry(tokens, b) for b in sizes]}, children per node "
                      f"{[entry(topk_at, b) for b in sizes]}, draft ms {[round(m, 1) for m in ms]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
