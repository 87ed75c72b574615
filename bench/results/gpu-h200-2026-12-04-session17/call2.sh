# session 17 call 2: the WY gated delta tree kernel on the GPU: its tests (and the recurrent kernels' and
# the hybrid pipelines'), the kernels by variant, then hybrid_bench's roofline with WY the default
. bench/results/gpu-h200-2026-12-03-session15/setup.sh
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/hybrid/test_triton_delta_wy.py tests/hybrid/test_triton_recurrent.py \
  tests/hybrid/test_triton_pipeline.py tests/hybrid/test_chain_tree.py > $OUT/gpu-tests.txt 2>&1; echo "tests rc=$?"; tail -n 3 $OUT/gpu-tests.txt
timeout 110 python3 bench/recurrent_tree_kernels.py --out $OUT/recurrent_tree_kernels.json > $OUT/rtk-log.txt 2>&1; echo "rtk rc=$?"
grep -a -A12 '"gated_delta_wy_us"' $OUT/rtk-log.txt | head -16
timeout -s INT 270 python3 bench/hybrid_bench.py --out /tmp/hb --stages models,compile,roofline --budget-s 255 > $OUT/hybrid-log.txt 2>&1; echo "hb rc=$?"
cp /tmp/hb/hybrid_bench.json /tmp/hb/hybrid_bench.md $OUT/ 2>/dev/null
grep -a "verify cost\|AR forward" $OUT/hybrid-log.txt | tail -3
