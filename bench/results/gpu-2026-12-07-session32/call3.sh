# Session 32's third device call: the README's GPU pipelines through `specir check` with stage_server.FORK_ON_CUDA
# on (every guard stage forked from the stage server on the GPU machine). Run after session 15's setup, carry .whl:
#   . bench/results/gpu-h200-2026-12-03-session15/setup.sh; bash bench/results/gpu-2026-12-07-session32/call3.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c "from specir.guard import stage_server as s; print('FORK_ON_CUDA', s.FORK_ON_CUDA)"
timeout 300 python3 -m pytest -p no:cacheprovider -q -x tests/step/test_readme_gpu_pipelines.py \
  tests/guard/test_stage_server.py --durations=8 2>&1 | tee $OUT/call3-log.txt | tail -14
