# Session 31's third call: the guard's stage server on a GPU. A forked stage runs a CUDA op, and the README's GPU
# pipelines compile for the GPU and pass `specir check` (the guard's child forked from the server, on the GPU).
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session31/stage-server-gpu.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
set -o pipefail
timeout 520 python3 -m pytest -p no:cacheprovider -q -x tests/guard/test_stage_server.py \
  tests/step/test_readme_gpu_pipelines.py --durations=10 2>&1 | tee $OUT/pytest-log.txt | tail -25
