"""bench/bf12_executor_bits.py at tiny shapes in the Triton interpreter: a model and its packed twin
give the same logits bits over a prefill and decodes (the GPU run does the same at 8B shapes)."""
from __future__ import annotations

import os

import pytest

from tests.helpers.bench_scripts import load_bench_script


def test_packed_and_plain_executor_logits_are_bit_identical(capsys):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("CPU smoke test; on a GPU run the benchmark itself")
    assert load_bench_script("bf12_executor_bits").main(["--tiny", "--layers", "1", "--decodes", "1"]) == 0
    assert "bit-identical" in capsys.readouterr().out
