"""Production shapes that `specir zoo inflate` builds (Llama family), as data.

A shape fixes every dimension, the rope parameters and embedding tying; inflating a small model
needs the small model's head_dim, GQA ratio, rope parameters and tying to match (the zoo's pair is
trained so: the target for llama-3.1-8b and llama-1b-hd128, the drafter for llama-3.2-1b and
llama-1b-width-3l, the 1B width at the drafter's own depth: no extra layers; the mid model for
llama-3.2-3b, whose head_dim 128, 3 query heads per kv head, rope factor 32 and tied embeddings
it carries).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from specir.errors import SpecirError
from specir.zoo.architectures import ROPE_LLAMA31, ROPE_LLAMA32


@dataclass(frozen=True)
class Shape:
    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    rope_parameters: dict = field(hash=False)
    max_position_embeddings: int = 131072
    note: str = ""

    def parameters(self) -> int:
        h, q, kv = self.hidden_size, self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        layer = h * (2 * q + 2 * kv) + 3 * h * self.intermediate_size + 2 * h
        emb = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * layer + emb + h

    def describe(self) -> str:
        return (f"hidden {self.hidden_size}, {self.num_hidden_layers} layers, "
                f"{self.num_attention_heads}/{self.num_key_value_heads} heads x {self.head_dim}, "
                f"intermediate {self.intermediate_size}, vocab {self.vocab_size}, "
                f"{'tied' if self.tie_word_embeddings else 'untied'}, rope factor "
                f"{self.rope_parameters.get('factor')}, {self.parameters() / 1e9:.2f}B params"
                + (f"  ({self.note})" if self.note else ""))


SHAPES = {s.name: s for s in [
    Shape("llama-3.1-8b", 4096, 32, 32, 8, 128, 14336, 128256, False, ROPE_LLAMA31,
          note="Llama-3.1-8B; for the zoo target"),
    Shape("llama-1b-hd128", 2048, 16, 16, 4, 128, 8192, 128256, False, ROPE_LLAMA31,
          note="1B-class with the 8B's heads and rope; quick target runs"),
    Shape("llama-3.2-1b", 2048, 16, 32, 8, 64, 8192, 128256, True, ROPE_LLAMA32,
          note="Llama-3.2-1B; for the zoo drafter"),
    Shape("llama-1b-width-3l", 2048, 3, 32, 8, 64, 8192, 128256, True, ROPE_LLAMA32,
          note="Llama-3.2-1B width at the zoo drafter's depth (3 layers map 1:1): a drafter costing "
               "what a trained 3-layer one would"),
    Shape("llama-3.2-3b", 3072, 28, 24, 8, 128, 8192, 128256, True, ROPE_LLAMA32,
          note="Llama-3.2-3B; for the zoo mid model (two-level verification)"),
    Shape("test-target", 512, 8, 8, 2, 128, 1536, 8192, False, ROPE_LLAMA31,
          note="small; CPU checks of the zoo target"),
    Shape("test-drafter", 256, 4, 8, 2, 64, 768, 8192, True, ROPE_LLAMA32,
          note="small; CPU checks of the zoo drafter"),
    Shape("test-mid", 384, 6, 6, 2, 128, 1152, 8192, True, ROPE_LLAMA32,
          note="small; CPU checks of the zoo mid model"),
]}


def get_shape(name: str) -> Shape:
    if name not in SHAPES:
        raise SpecirError(f"unknown shape '{name}'", hint=f"known shapes: {', '.join(SHAPES)}")
    return SHAPES[name]
