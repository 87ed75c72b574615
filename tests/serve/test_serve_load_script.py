"""bench/serve_load.py: its report table from a results object (the measurement itself runs servers
for minutes and is not part of the suite)."""
from __future__ import annotations

from tests.helpers.bench_scripts import load_bench_script


def test_report_table():
    mod = load_bench_script("serve_load")
    rnd = {"tok_s": 20.0, "tok_per_cpu_s": 50.0, "p50_s": 1.0, "p99_s": 2.0}
    fast = {"tok_s": 40.0, "tok_per_cpu_s": 90.0, "p50_s": 0.5, "p99_s": 0.9}
    res = {"serve": {1: {"ar": {"median": mod.median_of([rnd])}, "spec": {"median": mod.median_of([fast, fast])}}},
           "bench": {1: {"tok_s": 50.0, "e2e_tok_s": 42.0}},
           "meta": {"date": "2026-12-01", "machine": "x86_64, 2 cores", "load_average_before": (1.0, 1.0, 1.0),
                    "load_average_after": (2.0, 2.0, 2.0), "command": "python bench/serve_load.py --out X",
                    "max_tokens": 64, "prompts": 32, "repeats": 1}}
    text = mod.report(res)
    assert "| 1 | 20.0 | 40.0 | 2.00x | 50.0 | 90.0 | 1.80x | 0.50 / 0.90 | 50.0 | 42.0 | 0.95 |" in text


def test_report_names_the_spec_passes():
    mod = load_bench_script("serve_load")
    meta = {"spec_passes": "ngram-draft{k=4},batch-fusion{shrink=true,target=cpu}"}
    assert mod.spec_desc({}) == "chain k=4"
    assert mod.spec_desc({"spec_passes": ""}) == "chain k=4"
    assert 'compiled with -p "ngram-draft{k=4},batch-fusion{shrink=true,target=cpu}"' in mod.spec_desc(meta)
    assert mod.spec_desc({"source": "/tmp/zoo8b/p.spec", "spec_passes": "batch-fusion"}) == \
        '`/tmp/zoo8b/p.spec` compiled with -p "batch-fusion"'
    assert mod.spec_desc({"source": "/tmp/zoo8b/p.spec"}) == "`/tmp/zoo8b/p.spec` as written"


def test_default_rounds_cover_the_prompts_bench_times():
    """Serve and bench compare on the same prompts: a round sends every prompt at least once (at
    concurrency 1 and 8 exactly once), and four passes from 32 clients on (a short drain)."""
    mod = load_bench_script("serve_load")
    assert mod.default_per_client(1, 32) == 32 and mod.default_per_client(8, 32) == 4
    assert mod.default_per_client(32, 32) == 4 and mod.default_per_client(64, 32) == 2
    assert mod.default_per_client(5, 32) * 5 >= 32


def test_the_continuous_bench_gets_one_rounds_requests_and_its_row():
    """The continuous-batching comparator times exactly the requests a round sends, in its clients'
    order, and the report prints its tok/s, prefill share and the serve / bench ratios."""
    mod = load_bench_script("serve_load")
    pool = [[i] for i in range(5)]
    assert mod.round_requests(pool, 2, 3) == [[0], [3], [1], [4], [2], [0]]  # wave by wave
    rnd = {"tok_s": 20.0, "tok_per_cpu_s": 50.0, "p50_s": 1.0, "p99_s": 2.0}
    fast = {"tok_s": 45.0, "tok_per_cpu_s": 90.0, "p50_s": 0.5, "p99_s": 0.9}
    res = {"serve": {8: {"ar": {"median": rnd}, "spec": {"median": fast}}}, "bench": {},
           "bench_continuous": {"8": {"tok_s": 50.0, "ar_tok_s": 25.0, "prefill_s": 0.4, "busy_s": 2.0,
                                      "ar_prefill_s": 0.5, "ar_busy_s": 3.0}},
           "meta": {"date": "2026-12-03", "machine": "x86_64, 2 cores", "load_average_before": (1.0, 1.0, 1.0),
                    "load_average_after": (1.0, 1.0, 1.0), "command": "python bench/serve_load.py --out X",
                    "max_tokens": 48, "prompts": 32, "repeats": 1}}
    assert "| 8 | 50.0 / 25.0 | 0.40 of 2.00; 0.50 of 3.00 | 0.90; 0.80 |" in mod.report(res)  # spec; AR


def test_the_report_splits_a_rounds_wall_seconds():
    """A round's wall seconds split into the server's decode steps, prefills and the rest."""
    mod = load_bench_script("serve_load")
    base = {"tok_s": 20.0, "tok_per_cpu_s": 50.0, "p50_s": 1.0, "p99_s": 2.0}
    spec = base | {"wall_s": 10.0, "step_s": 6.0, "steps": 300, "prefill_s": 1.5, "prefills": 30}
    ar = base | {"wall_s": 12.0, "step_s": 9.0, "steps": 900, "prefill_s": 1.0, "prefills": 30}
    res = {"serve": {8: {"ar": {"median": mod.median_of([ar])}, "spec": {"median": mod.median_of([spec])}}},
           "bench": {}, "meta": {"date": "2026-12-03", "machine": "x86_64, 2 cores",
                                 "load_average_before": (1.0, 1.0, 1.0), "load_average_after": (1.0, 1.0, 1.0),
                                 "command": "python bench/serve_load.py --out X", "max_tokens": 48, "prompts": 32,
                                 "repeats": 1}}
    assert "| 8 | 10.00; 12.00 | 6.00, 20.0; 9.00, 10.0 | 1.50, 30; 1.00, 30 | 2.50; 2.00 |" in mod.report(res)
