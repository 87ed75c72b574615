# Session 27's short call (issue 17), about 270 s, for when little device time is left: the depth-10 tree against
# tree-fr through `specir bench --check` at b1, then gpu_bench's AR step and drafter step with what is left.
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session27/call0.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c0; rm -rf $R; mkdir -p $R
T=${T:-270}
pack() { tar -C $R -czf $OUT/call0.tgz --exclude="trace-*" . ; }
left=$((T < 185 ? T - 15 : 170))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds tree-fr-d10k8b64,tree-fr \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 50 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A3 "^build " $R/s-log.txt | head -4
left=$((T - SECONDS))
[ $left -gt 50 ] && timeout $left python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn \
  --budget-s $((left - 5)) > $R/gb-log.txt 2>&1
echo "gpu_bench at ${SECONDS}s"; pack; tail -n 9 $R/gb-log.txt 2>/dev/null | cut -c1-200
