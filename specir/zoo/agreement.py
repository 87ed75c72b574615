"""`specir zoo agree`: token-forcing greedy agreement between a small model and its inflation.

For each prompt, the small model's greedy continuation (batched generation) is the forced
sequence. Both models then run on prompt + continuation, unpadded, in the same dtype; at every
position that predicts a continuation token, their argmax tokens are compared (the big model's
argmax over its whole, padded vocabulary). The report gives the agreement per workload and
overall, every disagreement with both models' top-1/top-2 logit gaps (near-ties explain
disagreements; a padding token winning does not), and the largest logit difference on the
small vocabulary.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from specir.errors import SpecirError
from specir.zoo import workloads as workloads_mod
from specir.zoo.progress import Progress

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_causal_lm(folder: Path, dtype: torch.dtype, device: str):
    """A transformers causal LM from `folder`, in eval mode on `device`."""
    from transformers import AutoModelForCausalLM

    if not (Path(folder) / "config.json").is_file():
        raise SpecirError(f"{folder} is not a model folder (no config.json)", path=str(folder),
                          hint="give a Hugging Face model folder")
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, device_map=device)
    except (ImportError, ValueError):  # no accelerate for device_map
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).to(device)
    except OSError as exc:
        raise SpecirError(f"cannot load {folder}: {exc}", path=str(folder),
                          hint="check that transformers loads this folder") from None
    return model.eval()


def _prompts(tokenizer, workloads: list[str] | None, limit: int | None) -> list[dict]:
    specs = workloads or workloads_mod.names()
    if not specs:
        raise SpecirError("no workload to measure on", hint="pass --workload NAME or FILE.jsonl")
    out = []
    for spec in specs:
        records = workloads_mod.resolve(spec)[:limit]
        for rec in records:
            ids = rec.get("prompt_ids") or tokenizer(rec["prompt"], add_special_tokens=False)["input_ids"]
            out.append({"id": rec["id"], "workload": rec.get("workload", Path(spec).stem),
                        "ids": list(ids), "max_new_tokens": rec.get("max_new_tokens", 64)})
    return out


@torch.no_grad()
def _greedy_continuations(model, prompts: list[dict], pad_id: int, eos_id, device: str,
                          max_new_tokens: int | None, batch_size: int, log) -> None:
    progress = Progress(len(prompts), "agree: generating", every_s=10.0, unit=" prompts")
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]["ids"]))
    for start in range(0, len(order), batch_size):
        group = [prompts[i] for i in order[start:start + batch_size]]
        width = max(len(p["ids"]) for p in group)
        ids = torch.full((len(group), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for row, p in enumerate(group):
            ids[row, width - len(p["ids"]):] = torch.tensor(p["ids"])
            mask[row, width - len(p["ids"]):] = 1
        new = max_new_tokens or max(p["max_new_tokens"] for p in group)
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                             max_new_tokens=new, do_sample=False, pad_token_id=pad_id,
                             eos_token_id=eos_id, temperature=None, top_p=None, top_k=None)
        for row, p in enumerate(group):
            cont = out[row, width:].tolist()[: (max_new_tokens or p["max_new_tokens"])]
            if eos_id is not None and eos_id in cont:
                cont = cont[: cont.index(eos_id) + 1]
            p["continuation"] = cont
        progress.update(len(group))
    progress.close()


def _top2_gap(logits: torch.Tensor) -> torch.Tensor:
    top = logits.topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


@torch.no_grad()
def measure_agreement(small_dir: Path, big_dir: Path, *, workloads: list[str] | None = None,
                      limit: int | None = None, max_new_tokens: int | None = None,
                      device: str = "cpu", dtype: str = "float32", batch_size: int = 16,
                      log=print) -> dict:
    """The agreement report of `big_dir` against `small_dir` (see the module docstring)."""
    from transformers import AutoTokenizer

    for folder in (small_dir, big_dir):
        if not (Path(folder) / "config.json").is_file():
            raise SpecirError(f"{folder} is not a model folder (no config.json)", path=str(folder),
                              hint="give the small model's folder and its inflation's folder")
    if not (Path(small_dir) / "tokenizer.json").is_file():
        raise SpecirError(f"{small_dir} has no tokenizer.json", path=str(small_dir),
                          hint="the prompts are tokenized with the small model's tokenizer")
    torch_dtype = DTYPES[dtype]
    tokenizer = AutoTokenizer.from_pretrained(str(small_dir))
    small = load_causal_lm(small_dir, torch_dtype, device)
    big = load_causal_lm(big_dir, torch_dtype, device)
    v_small = small.config.vocab_size
    if big.config.vocab_size < v_small:
        raise SpecirError("the big model's vocabulary is smaller than the small model's",
                          path=str(big_dir), hint="compare a model with its own inflation")
    prompts = _prompts(tokenizer, workloads, limit)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    _greedy_continuations(small, prompts, pad_id, tokenizer.eos_token_id, device,
                          max_new_tokens, batch_size, log)

    per_workload: dict[str, dict] = {}
    mismatches = []
    max_diff, sum_diff, n_pos = 0.0, 0.0, 0
    progress = Progress(len(prompts), "agree: forcing", every_s=10.0, unit=" prompts")
    for p in prompts:
        seq = torch.tensor([p["ids"] + p["continuation"]], device=device)
        n_prompt, n_cont = len(p["ids"]), len(p["continuation"])
        positions = slice(n_prompt - 1, n_prompt - 1 + n_cont)
        ls = small(input_ids=seq).logits[0, positions].float()
        lb = big(input_ids=seq).logits[0, positions].float()
        a_s, a_b = ls.argmax(-1), lb.argmax(-1)
        diff = (ls - lb[:, :v_small]).abs()
        max_diff = max(max_diff, float(diff.max()) if diff.numel() else 0.0)
        sum_diff += float(diff.mean(-1).sum()) if diff.numel() else 0.0
        n_pos += n_cont
        stats = per_workload.setdefault(p["workload"], {"tokens": 0, "agree": 0, "prompts": 0})
        stats["tokens"] += n_cont
        stats["agree"] += int((a_s == a_b).sum())
        stats["prompts"] += 1
        gaps_s, gaps_b = _top2_gap(ls[:, :v_small]), _top2_gap(lb)
        for i in (a_s != a_b).nonzero().flatten().tolist():
            mismatches.append({"id": p["id"], "position": n_prompt + i,
                               "small_token": int(a_s[i]), "big_token": int(a_b[i]),
                               "big_token_is_padding": int(a_b[i]) >= v_small,
                               "small_top2_gap": round(float(gaps_s[i]), 6),
                               "big_top2_gap": round(float(gaps_b[i]), 6)})
        progress.update(1)
    progress.close()
    tokens = sum(s["tokens"] for s in per_workload.values())
    agree = sum(s["agree"] for s in per_workload.values())
    for s in per_workload.values():
        s["agreement"] = s["agree"] / max(1, s["tokens"])
    inflation = Path(big_dir) / "inflation.json"
    shape = json.loads(inflation.read_text())["shape"] if inflation.exists() else None
    return {"small": str(small_dir), "big": str(big_dir), "big_shape": shape,
            "big_parameters": sum(p.numel() for p in big.parameters()),
            "dtype": dtype, "device": device,
            "tokens": tokens, "agree": agree, "agreement": agree / max(1, tokens),
            "workloads": per_workload, "max_abs_logit_diff": max_diff,
            "mean_abs_logit_diff": sum_diff / max(1, n_pos),
            "padding_token_wins": sum(m["big_token_is_padding"] for m in mismatches),
            "mismatches": mismatches}


def format_report(report: dict) -> str:
    lines = [f"greedy agreement of {report['big']} with {report['small']} ({report['dtype']}, "
             f"token forcing)", f"{'workload':18s} {'prompts':>7s} {'tokens':>7s} {'agree':>9s}"]
    for name, s in report["workloads"].items():
        lines.append(f"{name:18s} {s['prompts']:7d} {s['tokens']:7d} {s['agreement']:9.4%}")
    lines.append(f"{'all':18s} {'':7s} {report['tokens']:7d} {report['agreement']:9.4%}")
    lines.append(f"logits on the small vocabulary: max |diff| {report['max_abs_logit_diff']:.3g}, "
                 f"mean |diff| {report['mean_abs_logit_diff']:.3g}; padding tokens winning: "
                 f"{report['padding_token_wins']}")
    for m in report["mismatches"][:20]:
        lines.append(f"  differs: {m['id']} @{m['position']}: small {m['small_token']} "
                     f"(gap {m['small_top2_gap']:.3g}) vs big {m['big_token']} "
                     f"(gap {m['big_top2_gap']:.3g})")
    if len(report["mismatches"]) > 20:
        lines.append(f"  ... and {len(report['mismatches']) - 20} more (--json lists all)")
    return "\n".join(lines)
