"""A request's emitted-token bookkeeping (EOS, max_new) and a generate call's result."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Request:
    prompt: list[int]
    max_new: int
    slot: int
    tokens: list[int] = field(default_factory=list)  # prompt + generated; the last one is pending
    generated: list[int] = field(default_factory=list)
    accept_lengths: list[int] = field(default_factory=list)
    done: bool = False
    finish_reason: str | None = None  # "length" | "eos" | "stop" | "cancelled"
    stop: frozenset = frozenset()  # ids that end the request (besides the model's eos)

    def append(self, emitted: list[int], eos: set[int]) -> list[int]:
        """Take one step's emitted tokens, cut at the first EOS/stop id and at max_new; mark done.
        Returns the tokens kept."""
        emitted = emitted[: self.max_new - len(self.generated)]
        for i, t in enumerate(emitted):
            if t in eos or t in self.stop:
                emitted = emitted[: i + 1]
                self.done, self.finish_reason = True, ("eos" if t in eos else "stop")
                break
        self.generated += emitted
        self.tokens += emitted
        self.accept_lengths.append(len(emitted))
        if len(self.generated) >= self.max_new and not self.done:
            self.done, self.finish_reason = True, "length"
        return emitted


@dataclass
class Result:
    tokens: list[int]
    accept_lengths: list[int]
    seconds: float
    finish_reason: str | None = None

    @property
    def tau(self) -> float:
        return sum(self.accept_lengths) / max(len(self.accept_lengths), 1)
