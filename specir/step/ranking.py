"""Ranking a drafter's logits over the full vocabulary: top-k log-probabilities, one token's log-probability.

Contract: `top_log_probs(logits [..., V], k)` -> (log-probabilities [..., k] float32, token ids
[..., k]) of each row's k largest logits, largest first; `log_prob_of(logits, token)` -> the
float32 log-probability of `token` in each row; `log_sum_exp(logits)` -> each row's float32 log
normaliser. float32 (and any other non-half) logits: exactly torch.log_softmax's values in float32. Half-precision logits (bf16, f16,
what a GPU drafter's lm head writes) are never copied to float32 in full: the top-k runs on the
logits themselves (a 16-bit radix select: half the passes and bytes of a float32 one; the same
order, log_softmax being a shift per row) and the normaliser is max + log(sum(exp(x - max))) with
the exponentials in the logits' precision and the sum in float32 (error about 1e-3 nats; draft
scores only shape the tree, never what is accepted, so drafting stays lossless).

BYTES_PER_LOGIT: the device bytes `top_log_probs` moves per logit of a ranked row, by the logits'
dtype (read by the cost model: ModelForward.ranked rows of a draft forward cost this many bytes
per vocabulary entry). half: max 2, subtract 2+2, exp 2+2, sum 2, two radix passes 2+2, gather 2;
float32: log_softmax 3 reads + 1 write of 4, four radix passes of 4, gather 4.
"""
from __future__ import annotations

import torch

BYTES_PER_LOGIT = {"bf16": 18.0, "f16": 18.0, "f32": 36.0}
HALF = (torch.bfloat16, torch.float16)


def log_sum_exp(logits: torch.Tensor) -> torch.Tensor:
    if logits.dtype not in HALF:
        return torch.logsumexp(logits.float(), dim=-1)
    top = logits.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # an all -inf row: its lse stays -inf
    total = (logits - top).exp_().sum(dim=-1, dtype=torch.float32)
    return top.squeeze(-1).float() + total.log()


def top_log_probs(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    if logits.dtype not in HALF:
        return torch.topk(torch.log_softmax(logits.float(), dim=-1), k, dim=-1)
    vals, ids = torch.topk(logits, k, dim=-1)
    return vals.float() - log_sum_exp(logits)[..., None], ids


def log_prob_of(logits: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    if logits.dtype not in HALF:
        return torch.log_softmax(logits.float(), dim=-1).gather(-1, token[..., None])[..., 0]
    return logits.gather(-1, token[..., None])[..., 0].float() - log_sum_exp(logits)
