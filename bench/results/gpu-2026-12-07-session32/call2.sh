# Session 32's second device call, about 560 s. Run after session 15's setup, with carry=[".whl"]:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session32/call2.sh
# 1. the guard's stage server on the GPU (session 31's stage-server-gpu.sh: a forked stage's CUDA op, the README's
#    GPU pipelines through `specir check`);
# 2. issue 17's targets on this commit: `specir bench --check` at b1 on the README's pipeline, gpu_bench's AR step and
#    breakdown, bf12_step.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R=/tmp/c32b; rm -rf $R; mkdir -p $R
pack() { tar -C $R -czf $OUT/call2.tgz --exclude="trace-*" . ; }
timeout 200 python3 -m pytest -p no:cacheprovider -q -x tests/guard/test_stage_server.py \
  tests/step/test_readme_gpu_pipelines.py --durations=10 > $R/stage-server-log.txt 2>&1
echo "stage server tests rc=$? at ${SECONDS}s"; pack; tail -n 14 $R/stage-server-log.txt
timeout 200 python3 bench/h200_session.py --out $R/s --stages inflate,compile,bench \
  --builds tree-fr-d10k8b63v16384 \
  --batch-sizes 1 --limit 4 --max-new-tokens 64 --bench-limit-s 70 --budget-s 195 > $R/s-log.txt 2>&1
echo "8b rc=$? at ${SECONDS}s"; pack; grep -A3 "^build " $R/s-log.txt | head -4
timeout 70 python3 bench/gpu_bench.py --out $R/gb --quick --skip draft verify packed_attn e2e peers --budget-s 60 \
  > $R/gb-log.txt 2>&1
echo "gpu_bench rc=$? at ${SECONDS}s"; pack; grep -E "AR step ctx" $R/gb-log.txt | cut -c1-120
grep -E "^\| linear|^\| attention" $R/gb/gpu_bench.md 2>/dev/null | cut -c1-110
timeout 60 python3 bench/bf12_step.py --out $R/bf12 > $R/bf12-log.txt 2>&1
echo "bf12_step rc=$? at ${SECONDS}s"; pack; tail -n 4 $R/bf12-log.txt 2>/dev/null
