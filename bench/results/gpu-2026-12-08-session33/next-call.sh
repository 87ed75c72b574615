# Prepared for the next device call, about 560 s; not run in session 33 (its device time ran out). Run after session
# 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-08-session33/next-call.sh
# 1. the CLI with calibration VERSION 2 (a 1 GiB copy timed by CUDA events): the README pipeline and ar-bf12
#    (`specir init --drafter none`, pack-weights{format=bf12}: BF12's AR step against stock bf16 AR through
#    `specir bench --check`), with room for BF12's first compiles (call 1's 80 s did not cover them);
# 2. call3.sh: four BF12 GEMV fields in the chain.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c34; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/next.tgz --exclude="trace-*" . ; }
timeout 360 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench \
  --builds tree-fr-d10k8b63v16384,ar-bf12 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 150 --budget-s 350 > $R/s-log.txt 2>&1
echo "cli rc=$? at ${SECONDS}s"; pack
python3 - <<'PY' 2>/dev/null
import json
d = json.load(open("/tmp/c34/s/session.json"))
for r in d.get("bench_rows", []):
    print({k: r.get(k) for k in ("build", "speedup", "tau", "mismatches", "ar_step_ms", "ar_roofline_ms",
                                 "ar_x_roofline", "step_ms")})
PY
OUT_SAVED=$OUT; OUT=$R timeout $((580 - SECONDS)) bash bench/results/gpu-2026-12-08-session33/call3.sh \
  > $R/call3-log.txt 2>&1
rc=$?; OUT=$OUT_SAVED; echo "call3 rc=$rc at ${SECONDS}s"; pack; tail -n 10 $R/call3-log.txt
