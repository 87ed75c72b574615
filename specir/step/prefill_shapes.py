"""The shapes a prefill runs at: rows and tokens of each forward over a prompt batch.

Contract:
- Unbucketed (a backend that runs forwards eagerly, a model with recurrent state, or one whose
  forwards are not captured, e.g. a length-dependent rope): `n` requests run as n rows, the prompts padded
  to a multiple of the backend's `prefill_quantum`, in chunks of at most `limit` tokens (a model with
  recurrent state: its ring) or in one forward.
- Bucketed (a backend that captures a CUDA graph per forward shape, `StepBackend.captures`): so that
  every shape can be captured once at start-up, `rows(n, capacity)` is the next power of two (at
  most the capacity; the extra rows repeat row 0 and rewrite row 0's KV with its own values, as
  ForwardInputs allows pad rows to: sound while a row's result does not depend on which row of the
  batch it is, true of the Triton and cuBLAS kernels today, not of a split-K kernel reducing with
  atomics), and the tokens of each forward come from SIZES, at most
  TOKENS_PER_FORWARD rows x tokens (a longer prompt prefills chunk by chunk, each reading the
  chunks before it from the cache). `shapes(capacity, max_seq)` lists every (rows, tokens) a
  bucketed prefill can take.
`chunks(...) -> [(begin, size)]`: the forwards over token positions begin .. begin + size - 1
(the last chunk may run past the longest prompt: those rows are padding, rewritten later).
"""
from __future__ import annotations

SIZES = (32, 64, 96, 128, 192, 256, 384, 512)  # tokens per forward of a bucketed prefill
TOKENS_PER_FORWARD = 2048  # rows x tokens of one bucketed prefill forward, at most


def rows(n: int, capacity: int) -> int:
    """The rows a bucketed prefill of n requests runs (a power of two, capped at the capacity)."""
    return min(1 << max(n - 1, 0).bit_length(), max(capacity, n))


def largest_size(rows_: int) -> int:
    """The longest chunk a forward of `rows_` rows takes."""
    fitting = [s for s in SIZES if rows_ * s <= TOKENS_PER_FORWARD]
    return fitting[-1] if fitting else SIZES[0]


def chunks(longest: int, *, rows_: int, max_seq: int, bucketed: bool, quantum: int = 1,
           limit: int | None = None) -> list[tuple[int, int]]:
    """(begin, size) of each forward over prompts of up to `longest` tokens (see the module doc);
    `limit` bounds unbucketed chunks (a recurrent model's ring), never bucketed ones."""
    if longest <= 0:
        return []
    if not bucketed:
        T = -(-longest // quantum) * quantum
        chunk = min(T, limit) if limit else T
        return [(b, min(chunk, T - b)) for b in range(0, T, chunk)]
    cap = largest_size(rows_)
    out, begin = [], 0
    while begin < longest:
        left = longest - begin
        size = cap if left >= cap else next(s for s in SIZES if s >= left)  # (cap is one of SIZES)
        size = min(size, max_seq - begin)  # never past the cache's rows
        out.append((begin, size))
        begin += size
    return out


def shapes(capacity: int, max_seq: int) -> list[tuple[int, int]]:
    """Every (rows, tokens) a bucketed prefill into a session of `capacity` slots can run."""
    counts = sorted({rows(n, capacity) for n in range(1, capacity + 1)})
    return [(r, s) for r in counts for s in SIZES if s <= largest_size(r) and s <= max_seq]
