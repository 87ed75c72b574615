"""`specir zoo train`: plain next-token training (optionally distilled) of a zoo model.

Contract:
- data: random `seq_len + 1` windows of a corpus folder's `train.npy`; the batch of step k is a
  pure function of (seed, k), so a resumed run sees exactly the batches the uninterrupted run
  would have seen and continues the same loss curve;
- optimiser: AdamW (decay on matrices only), linear warm-up then cosine decay to
  `min_lr_ratio * lr`, gradient clipping; fp32 master weights, bf16 autocast on CUDA;
- length: `steps`, or `minutes` of wall time (the step count is fixed after timing the first
  steps, then stored in the checkpoint), capped at `max_epochs` passes over the train split;
- output in `out/`: `checkpoints/<name>.pt` (written atomically every `checkpoint_every_s` and at
  the end), the Hugging Face folder `<name>/` (bf16 `model.safetensors`, config, tokenizer,
  `train_log.json`) and `<name>.tar` of that folder; a run on windows other than 512 tokens also
  logs `heldout_loss_512`, the held-out loss on the pair's 64 windows of 512 tokens (comparable
  with the shipped models');
- distillation: with `teacher`, the loss is `(1-w) * cross-entropy + w * KL(teacher || student)`.
"""
from __future__ import annotations

import json
import math
import os
import platform
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from specir.errors import SpecirError
from specir.zoo import corpus as corpus_mod
from specir.zoo.hybrid_architecture import count_parameters, model_config
from specir.zoo.progress import Progress
from specir.zoo.tokenizer import save_hf_tokenizer

MODEL_NAMES = {"target": "code-target", "drafter": "code-drafter", "mid": "code-mid",
               "hybrid": "code-hybrid-target"}
DEFAULT_LR = {"target": 2e-3, "drafter": 3e-3, "mid": 2.5e-3, "hybrid": 2e-3}  # peak learning rates; the narrower model takes more
CALIBRATION_STEPS = (3, 20)  # time steps [3, 20) to fix the step count of a timed run


@dataclass
class TrainSettings:
    """Everything that determines a run's loss curve (stored in its checkpoint)."""

    role: str = "target"
    seq_len: int = 512
    batch_size: int = 64
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    steps: int | None = None
    minutes: float | None = None
    max_epochs: float = 16.0
    eval_windows: int = 64
    evals: int = 10
    seed: int = 0
    teacher: str | None = None
    distill_weight: float = 0.7
    architecture: dict = field(default_factory=dict)  # overrides of the role's architecture

    @property
    def name(self) -> str:
        return MODEL_NAMES.get(self.role, self.role)


def lr_at(step: int, total: int, s: TrainSettings) -> float:
    """Warm-up then cosine learning rate of `step` (0-based) in a run of `total` steps."""
    if step < s.warmup_steps:
        return s.lr * (step + 1) / s.warmup_steps
    progress = min(1.0, (step - s.warmup_steps) / max(1, total - s.warmup_steps))
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def batch_at(tokens: np.ndarray, step: int, s: TrainSettings) -> torch.Tensor:
    """The [batch, seq_len + 1] int64 windows of training step `step`."""
    rng = np.random.default_rng([s.seed, step])
    starts = rng.integers(0, tokens.size - s.seq_len - 1, size=s.batch_size)
    return torch.from_numpy(np.stack([tokens[i:i + s.seq_len + 1] for i in starts]).astype(np.int64))


def heldout_windows(tokens: np.ndarray, s: TrainSettings) -> torch.Tensor:
    """A fixed set of evaluation windows, evenly spaced over the held-out split."""
    n = min(s.eval_windows, max(1, (tokens.size - 1) // (s.seq_len + 1)))
    starts = np.linspace(0, tokens.size - s.seq_len - 1, n).astype(np.int64)
    return torch.from_numpy(np.stack([tokens[i:i + s.seq_len + 1] for i in starts]).astype(np.int64))


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def _make_model(config, device):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").to(device)


def _make_optimizer(model, s: TrainSettings, device):
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": s.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=s.lr, betas=(0.9, 0.95), eps=1e-8, **kwargs)


@torch.no_grad()
def evaluate(model, windows: torch.Tensor, s: TrainSettings, device) -> float:
    """Mean next-token cross-entropy (nats) over the windows."""
    model.eval()
    total, count = 0.0, 0
    for chunk in windows.split(s.batch_size):
        chunk = chunk.to(device)
        with _autocast(device):
            logits = model(input_ids=chunk[:, :-1]).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum")
        total += loss.item()
        count += chunk[:, 1:].numel()
    model.train()
    return total / count


def heldout_loss_512(model, corpus: Path, s: TrainSettings, device, windows: int = 64) -> float | None:
    """Held-out loss (rounded) on the shipped pair's evaluation windows (64 of 512 tokens), whatever
    `s.seq_len`; None for a held-out split shorter than one window."""
    from dataclasses import replace

    tokens = corpus_mod.load_tokens(corpus, "heldout")
    if tokens.size <= 513:
        return None
    ref = replace(s, seq_len=512, eval_windows=windows, batch_size=min(s.batch_size, 8))
    return round(evaluate(model, heldout_windows(tokens, ref), ref, device), 5)


def _load_teacher(path: str, vocab_size: int, device):
    from transformers import AutoModelForCausalLM

    try:
        teacher = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.bfloat16 if device.type == "cuda" else torch.float32).to(device)
    except OSError as exc:
        raise SpecirError(f"cannot load the distillation teacher: {exc}", path=path,
                          hint="train the target first, or drop --distill") from None
    if teacher.config.vocab_size != vocab_size:
        raise SpecirError(f"teacher vocabulary {teacher.config.vocab_size} differs from the corpus's "
                          f"{vocab_size}", path=path, hint="use a teacher trained on this corpus")
    return teacher.eval().requires_grad_(False)


def _save_atomic(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _comparable(s: TrainSettings) -> dict:
    d = asdict(s)
    for key in ("steps", "minutes", "evals"):  # may change on resume
        d.pop(key)
    return d


def train(corpus: Path, out: Path, settings: TrainSettings, *, device: str = "cpu",
          resume: bool = False, fresh: bool = False, stop_after: int | None = None,
          command: str = "", log=print) -> dict:
    """Train (or resume) one model; returns its training log. `stop_after` ends this process's
    run after that many total steps without finishing (for interruption tests)."""
    s = settings
    if (s.steps is None) == (s.minutes is None):
        raise SpecirError("give exactly one of --steps and --minutes")
    meta = corpus_mod.load_meta(corpus)
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SpecirError("--device cuda was asked for but this machine has no CUDA GPU",
                          hint="use --device cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    train_tokens = corpus_mod.load_tokens(corpus, "train")
    held_tokens = corpus_mod.load_tokens(corpus, "heldout")
    if train_tokens.size <= s.seq_len + 1 or held_tokens.size <= s.seq_len + 1:
        raise SpecirError(f"corpus {corpus} is too small for {s.seq_len}-token windows",
                          hint="use a smaller --seq-len")

    ckpt_path = out / "checkpoints" / f"{s.name}.pt"
    config = model_config(s.role, meta["vocab_size"], **s.architecture)
    torch.manual_seed(s.seed)
    model = _make_model(config, dev)
    optimizer = _make_optimizer(model, s, dev)
    state = {"step": 0, "total_steps": s.steps, "tokens_seen": 0, "elapsed_s": 0.0, "history": []}
    if ckpt_path.exists() and not (resume or fresh):
        raise SpecirError(f"a checkpoint of '{s.name}' already exists", path=str(ckpt_path),
                          hint="pass --resume to continue it, or --fresh to start over")
    if resume and ckpt_path.exists():
        saved = torch.load(ckpt_path, map_location=dev, weights_only=False)
        if _comparable(TrainSettings(**saved["settings"])) != _comparable(s):
            raise SpecirError("the checkpoint was made with other settings", path=str(ckpt_path),
                              hint="resume with the same options, or pass --fresh")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        log(f"train {s.name}: resumed at step {state['step']}")
    elif resume:
        log(f"train {s.name}: no checkpoint at {ckpt_path}; starting fresh")
    teacher = _load_teacher(s.teacher, meta["vocab_size"], dev) if s.teacher else None

    params = count_parameters(config)
    tokens_per_step = s.batch_size * s.seq_len
    epoch_cap = max(1, int(s.max_epochs * train_tokens.size / tokens_per_step))
    if state["total_steps"] is not None:
        state["total_steps"] = min(state["total_steps"], epoch_cap)
    windows = heldout_windows(held_tokens, s)
    log(f"train {s.name}: {params:,} parameters, {train_tokens.size:,} train tokens, "
        f"{tokens_per_step:,} tokens a step, device {dev}")

    def save_checkpoint():
        _save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "state": state, "settings": asdict(s)}, ckpt_path)

    if state["step"] == 0 and not state["history"]:
        state["history"].append({"step": 0, "tokens": 0, "lr": 0.0, "train_loss": None,
                                 "elapsed_s": 0.0,
                                 "heldout_loss": round(evaluate(model, windows, s, dev), 5)})
    run_start = time.perf_counter()
    elapsed_before = state["elapsed_s"]
    last_ckpt = time.perf_counter()
    calib_start = None
    progress = None
    model.train()
    while state["total_steps"] is None or state["step"] < state["total_steps"]:
        step = state["step"]
        if stop_after is not None and step >= stop_after:
            save_checkpoint()
            log(f"train {s.name}: stopped at step {step} (checkpoint saved)")
            return state
        if state["total_steps"] is None and calib_start is None and step >= CALIBRATION_STEPS[0]:
            calib_start = (step, time.perf_counter())  # also right after a resume
        if (state["total_steps"] is None and calib_start is not None and
                step >= max(CALIBRATION_STEPS[1], calib_start[0] + 5)):
            per_step = (time.perf_counter() - calib_start[1]) / (step - calib_start[0])
            spent = elapsed_before + time.perf_counter() - run_start
            budget = s.minutes * 60 * 0.93 - spent  # keep time for evaluations and saving
            state["total_steps"] = max(step + 1, min(epoch_cap, step + int(budget / per_step)))
            log(f"train {s.name}: {per_step * 1000:.1f} ms a step -> {state['total_steps']} steps "
                f"({state['total_steps'] * tokens_per_step / 1e6:.1f}M tokens)")
        total = state["total_steps"] or CALIBRATION_STEPS[1]
        if progress is None or progress.total != total:
            progress = Progress(total, f"train {s.name}", every_s=10.0)
            progress.done = step
        lr = lr_at(step, state["total_steps"] or 10**9, s)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = batch_at(train_tokens, step, s).to(dev, non_blocking=True)
        with _autocast(dev):
            logits = model(input_ids=batch[:, :-1]).logits
        flat = logits.float().flatten(0, 1)
        ce = F.cross_entropy(flat, batch[:, 1:].flatten())
        loss = ce
        if teacher is not None:
            with torch.no_grad(), _autocast(dev):
                t_logits = teacher(input_ids=batch[:, :-1]).logits
            kl = F.kl_div(F.log_softmax(flat, -1), F.log_softmax(t_logits.float().flatten(0, 1), -1),
                          log_target=True, reduction="batchmean")
            loss = (1 - s.distill_weight) * ce + s.distill_weight * kl
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
        optimizer.step()
        state["step"] = step + 1
        state["tokens_seen"] += tokens_per_step
        ce_value = ce.item()
        state["elapsed_s"] = elapsed_before + time.perf_counter() - run_start
        record = {"step": step + 1, "tokens": state["tokens_seen"], "lr": lr,
                  "train_loss": round(ce_value, 5), "elapsed_s": round(state["elapsed_s"], 2)}
        if state["total_steps"] is not None:
            eval_every = max(1, state["total_steps"] // max(1, s.evals))
            if (step + 1) % eval_every == 0 or step + 1 == state["total_steps"]:
                record["heldout_loss"] = round(evaluate(model, windows, s, dev), 5)
        state["history"].append(record)
        rate = state["tokens_seen"] / max(state["elapsed_s"], 1e-9)
        note = f"loss {ce_value:.3f} lr {lr:.2e} {rate:,.0f} tok/s"
        if "heldout_loss" in record:
            note += f" heldout {record['heldout_loss']:.3f}"
            log(f"train {s.name}: step {step + 1} {note}")
        progress.update(1, note)
        if time.perf_counter() - last_ckpt > 60:
            save_checkpoint()
            last_ckpt = time.perf_counter()
    if progress is not None:
        progress.close()
    save_checkpoint()
    return export(model, config, corpus, out, s, state, meta, params, dev, command, log)


def export(model, config, corpus: Path, out: Path, s: TrainSettings, state: dict, meta: dict,
           params: int, dev, command: str, log) -> dict:
    """Write the bf16 Hugging Face folder, its train_log.json and a tar of it; return the log."""
    import transformers

    folder = out / s.name
    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(str(folder))
    model.to(torch.float32)
    save_hf_tokenizer(corpus / "tokenizer.json", folder)
    history = state["history"]
    evals = [h for h in history if "heldout_loss" in h]
    held = meta["splits"]["heldout"]
    final_held = evals[-1]["heldout_loss"] if evals else None
    train_tail = [h["train_loss"] for h in history[-20:] if h["train_loss"] is not None]
    log_data = {
        "model": s.name, "role": s.role, "parameters": params,
        "architecture": {k: getattr(config, k) for k in (
            "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "intermediate_size", "tie_word_embeddings")},
        "settings": asdict(s), "steps": state["step"], "tokens_seen": state["tokens_seen"],
        "epochs": state["tokens_seen"] / meta["splits"]["train"]["tokens"],
        "train_loss_last20": sum(train_tail) / max(1, len(train_tail)),
        "heldout_loss": final_held,
        **({"heldout_loss_512": heldout_loss_512(model, corpus, s, dev)} if s.seq_len != 512 else {}),
        "heldout_bits_per_byte": (final_held * held["tokens"] / held["bytes"] / math.log(2)
                                  if final_held is not None else None),
        "wall_s": state["elapsed_s"], "device": str(dev) if dev.type == "cpu" else
        torch.cuda.get_device_name(dev), "torch": torch.__version__,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "corpus": {"python": meta["python"], "train_tokens": meta["splits"]["train"]["tokens"],
                   "heldout_tokens": held["tokens"], "vocab_size": meta["vocab_size"]},
        "command": command,
        "evals": evals,
    }
    (folder / "train_log.json").write_text(json.dumps(log_data, indent=1))
    with tarfile.open(out / f"{s.name}.tar", "w") as tar:
        tar.add(folder, arcname=s.name)
    log(f"train {s.name}: wrote {folder} and {s.name}.tar; held-out loss {final_held}")
    return log_data


def command_line() -> str:
    """The command that started this process as a `specir ...` line, for logs and model cards."""
    import shlex

    name = Path(sys.argv[0]).name
    prefix = "specir zoo" if name == "cmd_zoo.py" else "specir"
    return " ".join([prefix, *(shlex.quote(a) for a in sys.argv[1:])])
