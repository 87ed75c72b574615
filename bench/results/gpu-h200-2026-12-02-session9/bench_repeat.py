"""Why `specir bench` at batch 64 reads slower than step_profile's generates: runtime.bench.bench()
three times over the same engines (what the CLI builds), then plain generates of each engine."""
import argparse, json, os, sys, time
sys.path.insert(0, os.getcwd())
from specir.cli.common_run import read_prompts
from specir.runtime.baseline import ar_pipeline, target_name
from specir.runtime.bench import bench, _batches
from specir.runtime.session import open_session
from specir.step.engine import StepEngine

build, out = sys.argv[1], sys.argv[2]
session = open_session(build)
tgt = session.pipeline.model(target_name(session.pipeline))
args = argparse.Namespace(workload="code-completion", prompts=None, limit=8, max_new_tokens=96)
_, prompts = read_prompts(args, str(session.target_folder()), tgt.graph.result_type.width, tgt.attrs.get("max_position"), limit=8)
engine = session.engine()
ar = StepEngine(ar_pipeline(session.pipeline), engine.backend, base=session.base)
res = []
for i in range(3):
    rows = bench(engine, ar, {"code-completion": prompts}, [64], 96)
    r = rows[0].as_dict()
    res.append({"bench": i, "ar_tok_s": r.get("ar_tokens_per_s"), "tok_s": r.get("tokens_per_s"), "speedup": r.get("speedup")})
    print(res[-1], flush=True)
batch = _batches(prompts, 64)[0]
for name, e in (("ar", ar), ("pipeline", engine), ("ar", ar), ("pipeline", engine)):
    t = time.perf_counter(); e.generate(batch, 96)
    res.append({"generate": name, "decode_s": e.timings["decode_s"], "wall": time.perf_counter() - t})
    print(res[-1], flush=True)
json.dump(res, open(out, "w"), indent=1)
