# Session 29's first call (issue 17), about 345 s: does a 64-row verify (one GEMM row tile) beat 65 rows, does a
# smaller draft vocabulary pay at depth 10, and what do the split rope launch and the ranking's slicing cost?
# Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session29/call1.sh
# 1. `specir bench --check` at b1, code completion 4 x 64: depth 10 with budget 64 (65 rows), 63 (64 rows), and 63
#    with a 16384-id draft vocabulary;
# 2. bench/ranking_sweep.py: the ranking's pass-1 chunk x warps at a tree level's shapes;
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c1; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call1.tgz --exclude="trace-*" . ; }
left=$((300 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench \
  --builds tree-fr-d10k8b64,tree-fr-d10k8b63,tree-fr-d10k8b63v16384 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A5 "^build " $R/s-log.txt | head -6
timeout 40 python3 bench/ranking_sweep.py --out $R/ranking_sweep.json > $R/rk-log.txt 2>&1
echo "ranking rc=$? at ${SECONDS}s"; pack; tail -n 6 $R/rk-log.txt
