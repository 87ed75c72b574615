# The next GPU session's first call (issue 17), about 560 s. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session25/next.sh
# Session 25 turned every fusion on by default (passes/fusion.py, after an H100 measured the AR step 8.1 % faster with
# them) and keeps norm_linear's parts out of multi-row forwards (backends/triton/fused_parts.py). This call measures
# that on an H200, where issue 17's targets are stated:
# 1. the GPU benchmark's AR step against its roofline and its launch breakdown, at the new defaults (gpu_bench --quick);
# 2. `specir bench --check` at b1: tree-fr (the defaults: every fusion) and tree-fr-unfused (the four turned off);
# 3. the step profile of each, every op priced apart, with the target's AR step as each builds it (--ar-as-built);
# 4. the GEMM's RMSNorm prologue (rolled since a9f21cf) against the norm apart at 2, 4, 8 rows (norm_prologue_rows.py):
#    if folded wins, fused_parts.NORM_LINEAR_MAX_ROWS can rise;
# 5. BF12 against bf16 through one AR step (bf12_step.py).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/n; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/next.tgz --exclude="trace-*" . ; }
timeout 100 python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn --budget-s 95 \
  > $R/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; pack; tail -n 7 $R/gb-log.txt | cut -c1-200
timeout 200 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds tree-fr,tree-fr-unfused \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 55 --budget-s 195 > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A4 "^build " $R/s-log.txt | head -5
for b in tree-fr tree-fr-unfused; do
  left=$((430 - SECONDS)); [ $left -gt 30 ] && [ -d /tmp/zoo8b/build-$b ] || continue
  timeout $left python3 bench/step_profile.py /tmp/zoo8b/build-$b --ar-as-built --per-op --batch-size 1 --limit 1 \
    --max-new-tokens 32 --out $R/sp-$b > $R/sp-$b-log.txt 2>&1; echo "sp $b rc=$? at ${SECONDS}s"; pack
  grep -h "^  op" $R/sp-$b-log.txt | head -8
done
left=$((500 - SECONDS))
[ $left -gt 30 ] && timeout $left python3 bench/norm_prologue_rows.py --out $R/npr.json > $R/npr-log.txt 2>&1
echo "norm prologue rows at ${SECONDS}s"; pack; tail -n 17 $R/npr-log.txt
left=$((565 - SECONDS))
[ $left -gt 40 ] && timeout $left python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step at ${SECONDS}s"; pack; tail -n 6 $R/bf12-log.txt
