"""Per-step seconds at B live requests, AR build vs the n-gram+shrink build (AR mode from 7 live)."""
import sys, time, cProfile, pstats
from specir.runtime.session import open_session
from specir.runtime.prompts import to_ids, workload_records
B = int(sys.argv[1]); builds = [a for a in sys.argv[2:] if a != "--profile"]
sess0 = open_session(builds[0], "cpu")
pool = to_ids(workload_records(None, 8), str(sess0.target_folder()), 4096)
for build in builds:
    eng = open_session(build, "cpu").engine()
    def run(steps):
        dec = eng.open(B, eng.rows_needed(max(len(p) for p in pool[:B]) + 1, 200), sampling=False)
        for p in pool[:B]:
            dec.add(p, 200)
        for _ in range(3):
            dec.step()
        t = time.perf_counter()
        for _ in range(steps):
            dec.step()
        return (time.perf_counter() - t) / steps
    run(5)
    times = sorted(run(20) for _ in range(3))
    print(build, "step ms", [round(1e3 * x, 2) for x in times], flush=True)
    if "--profile" in sys.argv and build == builds[-1]:
        pr = cProfile.Profile(); pr.enable(); run(20); pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(14)
