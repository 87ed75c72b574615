# Session 30's device call (issue 17), about 560 s: everything a single call can answer, most important first.
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session30/call.sh
# 1. `specir bench --check` at b1, code completion 4 x 64: depth 10 at budget 64 (the README's pipeline, now with
#    the split rope launch) and at budget 63 with a 16384-id draft vocabulary (64 verify rows, a cheaper head);
# 2. gpu_bench --quick: the AR step against the roofline, its launch breakdown, the drafter step;
# 3. bf12_step: BF12 against bf16 through one AR step, bits compared;
# 4. the depth-10 build's step, every op priced apart (the rope launch's time per op);
# 5. bench/ranking_sweep.py: the ranking's pass-1 chunk x warps.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c30; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call30.tgz --exclude="trace-*" . ; }
timeout 250 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench \
  --builds tree-fr-d10k8b64,tree-fr-d10k8b63v16384 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 245 > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A4 "^build " $R/s-log.txt | head -5
timeout 75 python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn \
  --budget-s 70 > $R/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; pack
grep -E "copy bandwidth|AR step|step " $R/gb-log.txt | head -9 | cut -c1-200
timeout 50 python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step at ${SECONDS}s"; pack; tail -n 4 $R/bf12-log.txt 2>/dev/null
[ -d /tmp/zoo8b/build-tree-fr-d10k8b64 ] && timeout 60 python3 bench/step_profile.py \
  /tmp/zoo8b/build-tree-fr-d10k8b64 --ar-as-built --per-op --batch-size 1 --limit 1 --max-new-tokens 32 \
  --out $R/sp > $R/sp-log.txt 2>&1
echo "sp at ${SECONDS}s"; pack; grep -h "^  op" $R/sp-log.txt 2>/dev/null | head -8
left=$((560 - SECONDS))
[ $left -gt 20 ] && timeout $left python3 bench/ranking_sweep.py --out $R/ranking_sweep.json > $R/rk-log.txt 2>&1
echo "ranking rc=$? at ${SECONDS}s"; pack; tail -n 5 $R/rk-log.txt
