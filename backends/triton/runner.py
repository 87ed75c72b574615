"""`TritonModelRunner(compiled, slots=, max_seq=)`: specir.step.slot_runner.SlotRunner over a
CompiledModel (host-side committed lengths; for tests, tools and benchmarks)."""
from __future__ import annotations

from specir.step.slot_runner import SlotRunner


def TritonModelRunner(compiled, *, slots: int, max_seq: int) -> SlotRunner:  # noqa: N802 - a constructor
    return SlotRunner(compiled, slots=slots, max_seq=max_seq)
