# Times and profiles (cProfile) engine.generate of 32 workload prompts x 32 tokens for each build given
# (AR, and builds whose drafting is off at 32 live requests): python profile_off_step.py BUILD ...
import cProfile, pstats, sys, time
from specir.runtime.session import open_session
from specir.runtime.prompts import workload_records, to_ids
builds = sys.argv[1:]
recs = workload_records(None, 8)
res = {}
engines = {}
for b in builds:
    s = open_session(b)
    e = s.engine()
    ids = to_ids(recs, str(s.target_folder()), 4096)[:32]
    while len(ids) < 32: ids = ids + ids
    ids = ids[:32]
    e.generate(ids, 8)
    engines[b] = (e, ids)
for rnd in range(3):
    for b, (e, ids) in engines.items():
        t = time.perf_counter(); out = e.generate(ids, 32); dt = time.perf_counter() - t
        res.setdefault(b, []).append(dt)
for b, v in res.items(): print(b, ["%.3f" % x for x in v], "min %.3f" % min(v))
if True:  # the profile of one more generate per build
    for b, (e, ids) in engines.items():
        pr = cProfile.Profile(); pr.enable(); e.generate(ids, 32); pr.disable()
        print("=====", b); pstats.Stats(pr).sort_stats("tottime").print_stats(18)
