# Session 26's first call (issue 17), about 260 s (sized to the device time left). Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session26/call1.sh
# 1. the skinny GEMM's tiling at 65 rows (a 64-node tree's verify), BF12 timed, bf16 bits checked (gemm_tune.py): a
#    BF12 tree runs its verify on Triton's GEMM, 4x slower than the bf16 tree's on cuBLAS (session 25);
# 2. the winners written into linear_config.GEMM_TILES (gemm_tune.py --apply; the commit after this call holds the
#    same table), so that
# 3. `specir bench --check` at b1 times tree-fr-bf12 as built with it (its AR baseline: the bf16 target, fused).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c1; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call1.tgz --exclude="trace-*" . ; }
timeout 105 python3 bench/gemm_tune.py --out $R/gemm_tune.json --budget-s 85 > $R/gt-log.txt 2>&1
echo "gemm_tune rc=$? at ${SECONDS}s"; tail -n 6 $R/gt-log.txt | cut -c1-220
python3 bench/gemm_tune.py --apply $R/gemm_tune.json > $R/apply-log.txt 2>&1; tail -n 5 $R/apply-log.txt | cut -c1-200
cp backends/triton/kernels/linear_config.py $R/; pack
left=$((255 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds tree-fr-bf12 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 55 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A4 "^build " $R/s-log.txt | head -5
