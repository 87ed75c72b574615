"""What one `Engine.generate` call allocates, estimated up front from the IR, so a batch that cannot
fit is refused with a message before any work (instead of the OOM killer ending the process).

The estimate counts, for every model the step runs: the KV caches and position table the
runners preallocate (`slots = batch`, `max_seq` as the engine sizes it), and the largest
forward's transient tensors (the prefill over the longest prompt, or a verify over the draft
width): logits of a step's forward (a prefill computes none) in the model dtype and in fp32, fp32 activations of the widest layer, and the
fp32 keys, values and (where the backend materialises them) scores of attention; and a recurrent model's committed state and state
ring (specir.runtime.recurrent_state.ring_nodes). It grows linearly with the batch and is of the order
of the measured peak (the shipped pair, 8 workload prompts x 8 = batch 64, 16 new tokens on the
TVM backend: 2.1 GiB estimated, 1.8 GiB measured), so a batch it refuses could not have run.
"""
from __future__ import annotations

import math
import os

from ..backends_api import attention_scores
from ..cost_model import BYTES_PER_ELEMENT
from ..declared_target import read as read_declared
from ..errors import SpecirError
from ..ir.nodes import Model, Pipeline
from ..ir.ops_recurrent import model_state_specs
from .dtypes import dtype_bytes
from .recurrent_state import RING_NODES_MAX, node_bytes


def _model_bytes(model: Model, batch: int, tokens: int, max_seq: int, logit_rows: int, scores: bool) -> int:
    dtype = dtype_bytes(model)
    attention = [op for op in model.graph.ops if op.name == "attention"]
    cache = sum(2 * op.attrs["kv_heads"] * op.attrs["head_dim"] for op in attention) * max_seq * batch * dtype
    cache += 8 * batch * max_seq  # absolute positions
    vocab = model.graph.result_type.width
    widest = max((op.type.width for op in model.graph.ops if op.type is not None and op.type.name == "act"),
                 default=0)
    heads = max((op.attrs["heads"] * op.attrs["head_dim"] for op in attention), default=0)
    score_elems = max((op.attrs["heads"] for op in attention), default=0) * tokens * max_seq if scores else 0
    per_forward = batch * (logit_rows * vocab * (dtype + 4)  # logits (steps only: a prefill has none), fp32 copy
                           + 4 * tokens * widest * 3  # a few live fp32 activations of the widest layer
                           + 4 * 2 * heads * max_seq  # fp32 keys and values gathered for attention
                           + 4 * 2 * score_elems  # fp32 scores and probabilities (not with flash attention)
                           + (tokens if scores else logit_rows) * max_seq)  # visibility (a step's tree mask)
    return cache + per_forward


ROW_QUANTUM = 256  # the engine rounds cache rows up to this (specir.step.engine.ROW_QUANTUM)


def generate_bytes(pipeline: Pipeline, batch: int, prompt_len: int, max_new: int, *, scores: bool = True) -> int:
    """Bytes one generate call of `batch` prompts (the longest `prompt_len` tokens) needs at least.
    Cache rows and forward widths come from the step ops' interfaces, as the engine sizes them;
    `scores`: the backend's attention materialises its scores (backends_api.attention_scores)."""
    from ..step.interfaces import StepInfo
    info = StepInfo(pipeline)
    scratch = info.scratch_rows()
    widest = max((f.tokens for f in info.forwards()), default=1)
    total = 0
    for m in pipeline.models:
        if m.graph is None or not any(m.name == s.lstrip("@") for op in pipeline.step.ops for s in op.symbols):
            continue
        rows = prompt_len + max_new + scratch.get(m.name, 0) + info.emit_width + 8
        specs = model_state_specs(m)
        prefill = prompt_len
        if specs:  # recurrent state: committed plus the scratch ring, per slot; prefill in ring-sized chunks
            nodes = info.ring_nodes(m)
            total += batch * (nodes + 1) * node_bytes(specs, dtype_bytes(m))
            prefill = min(prompt_len, RING_NODES_MAX, nodes)
        total += _model_bytes(m, batch, max(prefill, widest, info.emit_width), -(-rows // ROW_QUANTUM) * ROW_QUANTUM,
                              max(widest, info.emit_width), scores)
    return total


WEIGHT_BYTES = BYTES_PER_ELEMENT  # bytes per weight element by IR dtype (cost_model)


def weight_bytes(pipeline: Pipeline, *, reference: bool = False) -> int:
    """Bytes of the checkpoint tensors a run loads: every weight of the models the step runs, plus,
    with `reference` (a `--check`), the declared target once more in its dtype (the judge's own copy)."""
    def of(model) -> int:
        return int(sum(math.prod(w.type.shape) * WEIGHT_BYTES.get(w.type.dtype, 2.0) for w in model.weights))
    used = {s.lstrip("@") for op in pipeline.step.ops for s in op.symbols}
    total = sum(of(m) for m in pipeline.models if m.graph is not None and m.name in used)
    declared = read_declared(pipeline) if reference else None
    target = pipeline.model(declared.model) if declared is not None else None
    if target is not None and target.graph is not None:
        total += int(sum(math.prod(w.type.shape) for w in target.weights) * WEIGHT_BYTES.get(declared.dtype, 2.0))
    return total


def available_bytes(device: str) -> int | None:
    """Memory free for new allocations on `device` (Linux MemAvailable; CUDA free memory), or None."""
    if str(device).startswith("cuda"):
        try:
            import torch
            return int(torch.cuda.mem_get_info()[0])
        except Exception:  # no driver: nothing to compare against
            return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_batch_fits(pipeline: Pipeline, batch: int, prompt_len: int, max_new: int, device: str,
                     option: str = "--batch-size", *, backend: str = "reference", resident: int = 0) -> None:
    """SpecirError when a batch of `batch` prompts cannot fit in the memory `device` has free on
    `backend` (whose attention may or may not materialise its scores), after `resident` bytes the
    command will load first (weight_bytes: the models, and a --check's reference)."""
    free = available_bytes(device)
    if free is None:
        return
    scores = attention_scores(backend)
    need = generate_bytes(pipeline, batch, prompt_len, max_new, scores=scores)
    if need + resident <= free:
        return
    where = "GPU" if str(device).startswith("cuda") else "this machine"
    if resident >= free:
        raise SpecirError(f"the weights alone need {_gb(resident)}, but {where} has {_gb(free)} free",
                          hint="use a device with more memory" + (" (bench --check loads a second copy of the "
                                                                  "target: check on a larger device)"
                                                                  if resident > weight_bytes(pipeline) else ""))
    has = f"{where} has {_gb(free)} free" + (f", {_gb(resident)} of it for the weights" if resident else "")
    room = free - resident
    if option == "--max-new-tokens":
        raise SpecirError(f"--max-new-tokens {max_new} needs at least {_gb(need)} for caches and activations, but "
                          f"{has}", hint="use fewer --max-new-tokens")
    one = max(generate_bytes(pipeline, 1, prompt_len, max_new, scores=scores), 1)
    fits = int(room // one)
    if fits < 1:
        raise SpecirError(f"{option} {batch} needs at least {_gb(need)} for caches and activations, but {has}",
                          hint="use a device with more memory" + (" (or fewer --max-new-tokens)" if max_new > 1 else ""))
    raise SpecirError(f"{option} {batch} needs at least {_gb(need)} for caches and activations (prompts of up to "
                      f"{prompt_len} tokens, {max_new} new tokens), but {has}",
                      hint=f"use {option} {min(fits, batch - 1)} or less" + (" (or fewer --max-new-tokens)"
                                                                            if max_new > 1 else ""))


def _gb(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**28 else f"{math.ceil(n / 2**20)} MiB"
