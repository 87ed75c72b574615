"""Per-role statistics of inflated weights against the trained ones they come from: standard
deviation and the bf16 exponent histogram (with the share of the best 14-exponent window, the
quantity the BF12 format depends on)."""
from __future__ import annotations

import torch


def bf16_exponents(t: torch.Tensor) -> torch.Tensor:
    """Counts of the 256 bf16 exponent-field values of `t`'s entries (as stored in bf16)."""
    bits = t.detach().to(torch.bfloat16).reshape(-1).view(torch.int16).to(torch.int32)
    return torch.bincount((bits >> 7) & 0xFF, minlength=256).cpu()


def window_coverage(counts: torch.Tensor, width: int = 14) -> float:
    """Largest share of entries whose exponents fall in `width` consecutive values."""
    total = counts.sum().item()
    if total == 0:
        return 0.0
    sums = counts.double().unfold(0, width, 1).sum(1)
    return float(sums.max().item() / total)


class TensorStats:
    """Accumulates the big tensors of one role (e.g. all q_proj) and their trained sources."""

    def __init__(self, role: str):
        self.role = role
        self.stds: list[float] = []
        self.trained_stds: list[float] = []
        self.hist = torch.zeros(256, dtype=torch.int64)
        self.trained_hist = torch.zeros(256, dtype=torch.int64)
        self._seen: set[int] = set()

    def add(self, big: torch.Tensor, trained: torch.Tensor | None) -> None:
        self.stds.append(float(big.float().std().item()) if big.numel() > 1 else 0.0)
        self.hist += bf16_exponents(big)
        if trained is not None and id(trained) not in self._seen:
            self._seen.add(id(trained))
            self.trained_stds.append(float(trained.float().std().item()) if trained.numel() > 1 else 0.0)
            self.trained_hist += bf16_exponents(trained)

    def summary(self) -> dict:
        def hist(counts):
            total = max(1, int(counts.sum()))
            return {int(e): round(int(c) / total, 6) for e, c in enumerate(counts.tolist()) if c}

        return {"tensors": len(self.stds),
                "std": {"min": min(self.stds), "max": max(self.stds)},
                "trained_std": ({"min": min(self.trained_stds), "max": max(self.trained_stds)}
                                if self.trained_stds else None),
                "distinct_exponents": int((self.hist > 0).sum()),
                "trained_distinct_exponents": int((self.trained_hist > 0).sum()),
                "window14_coverage": round(window_coverage(self.hist), 6),
                "trained_window14_coverage": round(window_coverage(self.trained_hist), 6),
                "exponent_histogram": hist(self.hist),
                "trained_exponent_histogram": hist(self.trained_hist)}


def format_stats(tensors: dict[str, dict]) -> str:
    """A table of an inflation report's per-role statistics."""
    lines = [f"{'tensor':26s} {'n':>3s} {'std (big)':>19s} {'std (trained)':>19s} "
             f"{'exponents':>9s} {'14-window':>17s}"]
    for role, s in tensors.items():
        t = s["trained_std"] or {"min": float("nan"), "max": float("nan")}
        lines.append(f"{role:26s} {s['tensors']:3d} {s['std']['min']:9.3g}-{s['std']['max']:<9.3g} "
                     f"{t['min']:9.3g}-{t['max']:<9.3g} {s['distinct_exponents']:4d}/{s['trained_distinct_exponents']:<4d} "
                     f"{s['window14_coverage']:8.4%}/{s['trained_window14_coverage']:.4%}")
    return "\n".join(lines)
