"""IR types.

Value types are `Type(name, params)`, printed `name` or `name<p1, p2>`:
- model graphs: `ids`, `positions`, `mask<causal>` / `mask<tree>`, `act<N>` (activations of
  width N per token), `logits<V>`;
- the decode step: `context`, `tokens`, `tree`, `logits`, `accepted`.
Weights have a `TensorType(dtype, shape)`, printed `bf16[4096, 4096]`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Type:
    name: str
    params: tuple = ()

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}<{', '.join(str(p) for p in self.params)}>"

    @property
    def width(self) -> int:
        """The N of `act<N>` / `logits<N>`."""
        return int(self.params[0])


@dataclass(frozen=True)
class TensorType:
    dtype: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"


def act(n: int) -> Type:
    return Type("act", (n,))


def logits(v: int | None = None) -> Type:
    return Type("logits", (v,)) if v is not None else Type("logits")


def mask(kind: str) -> Type:
    return Type("mask", (kind,))


IDS = Type("ids")
POSITIONS = Type("positions")
CONTEXT = Type("context")
TOKENS = Type("tokens")
TREE = Type("tree")
ACCEPTED = Type("accepted")

WEIGHT_DTYPES = ("bf16", "f16", "f32", "bf12", "i32")  # i32: token ids (draft-vocab), derived at load
