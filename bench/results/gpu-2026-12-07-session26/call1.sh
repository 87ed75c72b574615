# Session 26's first call (issue 17), about 560 s. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session26/call1.sh
# 1. the skinny GEMM's launch parameters at 65 rows (a tree verify), BF12 and bf16 bits checked (gemm_tune.py):
#    a BF12 tree runs its verify on Triton's GEMM, 4x slower than the bf16 tree on cuBLAS (session 25);
# 2. the GPU benchmark's AR step against its roofline, at the fused defaults and without (gpu_bench --quick);
# 3. `specir bench --check` at b1: tree-fr (every fusion, the defaults; its AR baseline fused too);
# 4. BF12 against bf16 through one AR step (bf12_step.py).
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c1; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call1.tgz --exclude="trace-*" . ; }
timeout 200 python3 bench/gemm_tune.py --out $R/gemm_tune.json --budget-s 180 > $R/gt-log.txt 2>&1
echo "gemm_tune rc=$? at ${SECONDS}s"; pack; tail -n 6 $R/gt-log.txt | cut -c1-220
timeout 100 python3 bench/gpu_bench.py --out $R/gb --quick --skip peers e2e verify packed_attn --budget-s 95 \
  > $R/gb-log.txt 2>&1; echo "gpu_bench rc=$? at ${SECONDS}s"; pack; tail -n 7 $R/gb-log.txt | cut -c1-200
left=$((480 - SECONDS))
timeout $left python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench --builds tree-fr \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 55 --budget-s $((left - 5)) > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A4 "^build " $R/s-log.txt | head -5
left=$((560 - SECONDS))
[ $left -gt 40 ] && timeout $left python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step at ${SECONDS}s"; pack; tail -n 6 $R/bf12-log.txt
