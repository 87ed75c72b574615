# The guard's stage server on a GPU (not run: no device was lent for the rest of session 31). A forked stage runs a
# CUDA op (test_a_forked_stage_runs_on_the_gpu); the README's GPU pipelines compile for the GPU and pass
# `specir check`. If both pass, stage_server.FORK_ON_CUDA can become True (and the README's guard paragraph says so).
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session31/stage-server-gpu.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
set -o pipefail
timeout 520 python3 -m pytest -p no:cacheprovider -q -x tests/guard/test_stage_server.py \
  tests/step/test_readme_gpu_pipelines.py --durations=10 2>&1 | tee $OUT/pytest-log.txt | tail -25
