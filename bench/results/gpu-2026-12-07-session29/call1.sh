# Session 29's first call (issue 17), about 520 s: does a 64-row verify (one GEMM row tile) beat 65 rows, and does
# a smaller draft vocabulary pay at depth 10? Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session29/call1.sh
# 1. bench/gemv.py --as-launched: cuBLAS and Triton at 8 (a drafter level), 56, 64 and 65 rows (budget + 1) on the
#    8B matrices as the forward launches them;
# 2. `specir bench --check` at b1, code completion 4 x 64: depth 10 with budget 64 (65 rows), 63 (64 rows), 63 with a
#    16384-id draft vocabulary, and 55 (56 rows).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c1; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call1.tgz --exclude="trace-*" . ; }
timeout 110 python3 bench/gemv.py --out $R/gemv --as-launched --ms 8,56,64,65 > $R/gemv-log.txt 2>&1
echo "gemv rc=$? at ${SECONDS}s"; pack; grep -E "^\| (qkv|o |gate|down|lm)" $R/gemv-log.txt | cut -c1-120
left=$((515 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench \
  --builds tree-fr-d10k8b64,tree-fr-d10k8b63,tree-fr-d10k8b63v16384,tree-fr-d10k8b55 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A6 "^build " $R/s-log.txt | head -7
