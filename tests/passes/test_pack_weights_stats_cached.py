"""pack-weights analyses each checkpoint matrix once: a second run of the pass (a search scores
every candidate, then compiles it) reads the statistics from the cache and decides the same."""
from __future__ import annotations

from pathlib import Path

from specir.bf12 import stats_cache
from specir.compiler import optimise
from specir.file_cache import FileCache
from specir.ir.printer import print_pipeline
from specir.ir.parser import parse
from specir.ir.verifier import infer_types

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "pack-weights"


def test_a_second_pack_weights_run_analyses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECIR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(stats_cache, "_CACHE", FileCache("bf12-stats"))
    calls = []
    real = stats_cache.analyze
    monkeypatch.setattr(stats_cache, "analyze", lambda w: (calls.append(tuple(w.shape)), real(w))[1])
    path = GOLDEN / "skip_and_models.spec"
    text = path.read_text()
    source = text[:text.index("\npipeline ", text.index("pipeline ") + 1)]  # the input case, as test_golden parses it
    spec = infer_types(parse(source, str(path)))
    first, _ = optimise(spec, "pack-weights")
    analysed = len(calls)
    assert analysed >= 2  # up and head of the target, head of the drafter (shared file entries)
    second, _ = optimise(spec, "pack-weights{models=target}")
    third, _ = optimise(spec, "pack-weights")
    assert len(calls) == analysed, "statistics of the same file version are read from the cache"
    assert print_pipeline(third) == print_pipeline(first)
    assert "packed_linear" in print_pipeline(second)
