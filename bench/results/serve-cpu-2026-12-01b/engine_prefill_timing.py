import sys, time
from specir.runtime.session import open_session
from specir.runtime.prompts import to_ids, workload_records
builds = sys.argv[1:]
pool = to_ids(workload_records(None, 8), str(open_session(builds[0], "cpu").target_folder()), 4096)
print("prompt lens", sorted(len(p) for p in pool)[::4])
for build in builds:
    eng = open_session(build, "cpu").engine()
    res = []
    for rep in range(4):
        dec = eng.open(8, eng.rows_needed(max(len(p) for p in pool) + 1, 60), sampling=False)
        t = time.perf_counter()
        for p in pool[rep * 8:(rep + 1) * 8]:
            dec.add(p, 60)
        dec.step()
        res.append(time.perf_counter() - t)
    print(build, "8 prefills + 1 step, s", [round(x, 3) for x in res], flush=True)
