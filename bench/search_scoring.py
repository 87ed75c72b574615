"""What the search's cost-model scoring of candidates costs for one input pipeline (the BF12
statistics are analysed on the GPU when there is one, else on the CPU).

    python bench/search_scoring.py P.SPEC        # e.g. the shipped pair inflated to the 8B shape

Times what `Search.score` runs for each candidate the built-in proposer considers: the passes on
the loaded input (`optimise`) and the printed IR, for the proposer's prior sample (200 random
candidates of the whole space, deduplicated by spelling): the first two pack-weights candidates
(the first pays the BF12 statistics of every weight unless the cache holds them), then the whole
sample with warm statistics. Use a fresh SPECIR_CACHE to see the cold figure.
"""
import contextlib
import io
import json
import random
import sys
import time

import _checkout  # noqa: F401  (a plain checkout runs too)
from specir.compiler import optimise  # noqa: E402
from specir.ir.printer import print_pipeline  # noqa: E402
from specir.load import load_pipeline  # noqa: E402
from specir.search.space import Space  # noqa: E402

spec = sys.argv[1]
t = time.time()
p = load_pipeline(spec)
load_s = time.time() - t
space = Space.from_registry({})
rng = random.Random(0)
pool = {space.spell(s): s for s in (space.random(rng) for _ in range(200))}
packs = [k for k in pool if "pack-weights" in k]
print(f"load {load_s:.2f} s; {len(pool)} distinct candidates, {len(packs)} with pack-weights", flush=True)
rows = {}


def score(k) -> bool:
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            q, _ = optimise(p, k, target="h200")
        print_pipeline(q)
        return True
    except Exception:  # noqa: BLE001 - an invalid combination scores as invalid in the search too
        return False


left = list(packs)
for label in ("first valid pack-weights candidate", "second valid pack-weights candidate"):
    t = time.time()
    while left and not score(left.pop(0)):
        pass
    rows[label] = round(time.time() - t, 2)
    print(label, rows[label], "s", flush=True)
t = time.time()
valid = sum(score(k) for k in pool)
rows[f"all {len(pool)} of the sample ({valid} valid), statistics warm"] = round(time.time() - t, 2)
print(json.dumps(rows), flush=True)
t = time.time()
with contextlib.redirect_stderr(io.StringIO()):
    optimise(spec, "", target="h200")
rows["one optimise from the spec file (parse + load)"] = round(time.time() - t, 2)
print(json.dumps(rows))
