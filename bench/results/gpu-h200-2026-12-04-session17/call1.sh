# the next GPU session's first call (not run in session 16; its device time was spent): the GPU tests of
# session 16's untested changes (conv1d PATHS compared to rounding when compiled, gated delta PATHS at
# 64 / 2, the hybrid norms on Triton, the hybrid pipelines end to end), the recurrent kernels by variant,
# then hybrid_bench's roofline (AR against the roofline and the 64-node verify with all three changes)
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/triton_backend/test_conv1d_tree_paths.py tests/hybrid/test_triton_recurrent.py \
  tests/triton/test_triton_hybrid_norm.py tests/triton/test_triton_pointwise.py tests/hybrid/test_triton_pipeline.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 3 $OUT/gpu-tests.txt
timeout 90 python3 bench/recurrent_tree_kernels.py --out $OUT/recurrent_tree_kernels.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
timeout -s INT 260 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --budget-s 245 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -a "verify cost\|AR forward" $OUT/hybrid-log.txt | tail -3
