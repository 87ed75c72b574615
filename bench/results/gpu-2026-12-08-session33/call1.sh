# Session 33's first device call (issue 17), about 560 s. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-08-session33/call1.sh
# 1. the CLI path on the README's GPU pipeline: `specir init`, `compile --target h200`, `bench --check` at batch 1
#    (bench/h200_session.py); `specir bench` now also reports the AR step in ms and against its byte roofline;
#    and `specir init --drafter none` + pack-weights{format=bf12}: BF12's AR step against stock bf16 AR (the CLI);
# 2. session 32's call4: BF12's order-neutral GEMV fields one at a time in the GEMV chain (the BF12 target);
# 3. what time is left: gemv_chain with the attention, o prefetching exactly its range (--o-iters all).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c33a; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call1.tgz --exclude="trace-*" . ; }
timeout 300 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench \
  --builds tree-fr-d10k8b63v16384,ar-bf12 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 80 --budget-s 290 > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack
python3 - <<'PY' 2>/dev/null
import json
d = json.load(open("/tmp/c33a/s/session.json"))
for r in d.get("bench_rows", []):
    print({k: r.get(k) for k in ("build", "batch_size", "ar_tokens_per_s", "tokens_per_s", "speedup", "tau",
                                 "mismatches", "ar_step_ms", "ar_roofline_ms", "ar_x_roofline", "step_ms")})
PY
OUT_SAVED=$OUT; OUT=$R timeout 190 bash bench/results/gpu-2026-12-07-session32/call4.sh > $R/call4-log.txt 2>&1
rc=$?; OUT=$OUT_SAVED; echo "call4 rc=$rc at ${SECONDS}s"; pack; tail -n 14 $R/call4-log.txt
left=$((580 - SECONDS))
[ $left -gt 70 ] && timeout $left python3 bench/gemv_chain.py --out $R/chain --layers 32 --iters 0 --bf12-layers 0 \
  --attention 512 --o-iters all > $R/chain-log.txt 2>&1
echo "gemv_chain rc=$? at ${SECONDS}s"; pack; tail -n 6 $R/chain-log.txt
