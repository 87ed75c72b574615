# The next GPU session's first call (issue 17), about 580 s. Session 26 got no machine (every start failed or was
# refused). Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session26/next.sh
# 1. the skinny GEMM's tiling at 65 rows (a 64-node tree's verify) for the 8B's four matrices, BF12 timed, bf16 bits
#    checked, cuBLAS for scale (gemm_tune.py). The table's tiling, 128 x 64 with 4 warps, takes 255 registers and
#    76-96 KB of shared memory: two programs an SM (gemm_registers.md); a BF12 tree's verify runs it, 4x slower than
#    the bf16 tree's cuBLAS verify (session 25);
# 2. the winners written into linear_config.GEMM_TILES (gemm_tune.py --apply; commit the returned linear_config.py
#    or rerun --apply on the returned JSON), so that
# 3. `specir bench --check` at b1 times tree-fr-bf12 as built with them, and tree-fr (bf16, the fused defaults);
# 4. the GPU benchmark's AR step against its roofline, at the fused defaults and without (gpu_bench --quick);
# 5. BF12 against bf16 through one AR step (bf12_step.py), if time is left.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/n26; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/next.tgz --exclude="trace-*" . ; }
timeout 215 python3 bench/gemm_tune.py --out $R/gemm_tune.json --budget-s 190 > $R/gt-log.txt 2>&1
echo "gemm_tune rc=$? at ${SECONDS}s"; tail -n 7 $R/gt-log.txt | cut -c1-250
python3 bench/gemm_tune.py --apply $R/gemm_tune.json > $R/apply-log.txt 2>&1; tail -n 5 $R/apply-log.txt | cut -c1-250
cp backends/triton/kernels/linear_config.py $R/; pack
left=$((470 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds tree-fr-bf12,tree-fr \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 60 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A4 "^build " $R/s-log.txt | head -5
left=$((570 - SECONDS))
[ $left -gt 60 ] && timeout $((left > 100 ? 100 : left)) python3 bench/gpu_bench.py --out $R/gb --quick \
  --skip peers e2e verify packed_attn --budget-s $((left > 100 ? 95 : left - 5)) > $R/gb-log.txt 2>&1
echo "gpu_bench at ${SECONDS}s"; pack; tail -n 7 $R/gb-log.txt 2>/dev/null | cut -c1-200
left=$((585 - SECONDS))
[ $left -gt 40 ] && timeout $left python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step at ${SECONDS}s"; pack; tail -n 6 $R/bf12-log.txt 2>/dev/null
