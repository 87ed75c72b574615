# call 5 (session 16, the last device time, fresh machine): the GPU tests of the recurrent tree kernels
# after the mends of call 4 (conv1d PATHS compared to fp32 rounding when compiled; gated delta PATHS
# launched at block_v 64 / 2 warps)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout -s INT 50 python3 -m pytest -q -p no:cacheprovider tests/triton_backend/test_conv1d_tree_paths.py tests/hybrid/test_triton_recurrent.py -k "path_replay or walk or gated or conv1d" 2>&1 | tail -n 4
