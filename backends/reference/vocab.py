"""Reference kernel of `vocab_scatter` (specir/ir/ops_vocab.py): logits over kept token ids placed at
their ids, -inf elsewhere."""
from __future__ import annotations

import torch


def vocab_scatter(params, state, x):
    """logits<vocab>: x[..., n] at id ids[n], -inf elsewhere."""
    out = x.new_full((*x.shape[:-1], int(params["vocab"])), float("-inf"))
    out[..., params["ids"].to(x.device, torch.long)] = x
    return out


KERNELS = {"vocab_scatter": vocab_scatter}
